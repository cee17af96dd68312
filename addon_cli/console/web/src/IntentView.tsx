// One intent's page: where it serves, why not (the explain chain and its advice), its
// rollout and the hub's Events (issue 33, item 1).
import { useEffect, useState } from "react";
import {
  ActionList,
  ActionListItem,
  Alert,
  Breadcrumb,
  BreadcrumbItem,
  Button,
  Card,
  CardBody,
  CardTitle,
  CodeBlock,
  CodeBlockCode,
  Content,
  Label,
  List,
  ListItem,
  PageSection,
  Title,
} from "@patternfly/react-core";
import { Table, Tbody, Td, Th, Thead, Tr } from "@patternfly/react-table";
import { IntentPage, Link, intentPage, remove, rolloutAction, watchFleet } from "./api";
import { PhaseLabel } from "./PhaseLabel";
import { RowsTable } from "./RowsTable";

function LinkMark({ ok }: { ok: boolean | null }) {
  if (ok === true) return <Label color="green">ok</Label>;
  if (ok === false) return <Label color="red">breaks here</Label>;
  return <Label color="orange">waiting</Label>;
}

function Chain({ cluster, links }: { cluster: string; links: Link[] }) {
  return (
    <Card isPlain isCompact data-testid={`chain-${cluster}`}>
      <CardTitle>
        <Title headingLevel="h3">On {cluster}</Title>
      </CardTitle>
      <CardBody>
        <List isPlain>
          {links.map((link, i) => (
            <ListItem key={i} data-testid={`link-${link.name}`}>
              <LinkMark ok={link.ok} /> <strong>{link.name}</strong> {link.summary}
              {link.evidence.length > 0 && (
                <List>
                  {link.evidence.map((line, j) => (
                    <ListItem key={j}>{line}</ListItem>
                  ))}
                </List>
              )}
            </ListItem>
          ))}
        </List>
      </CardBody>
    </Card>
  );
}

export function IntentView({ kind, namespace, name }: { kind: string; namespace: string; name: string }) {
  const [page, setPage] = useState<IntentPage | null>(null);
  const [error, setError] = useState("");
  const [notice, setNotice] = useState<{ ok: boolean; text: string } | null>(null);

  useEffect(() => {
    let live = true;
    let seen = "";
    let latest = 0;
    const load = () => {
      const asked = ++latest; // an older answer arriving late never replaces a newer one
      intentPage(kind, namespace, name)
        .then((p) => live && asked === latest && (setPage(p), setError("")))
        .catch((err: Error) => live && asked === latest && setError(err.message));
    };
    load();
    // The namespace's watch (the fleet stream): read the page again when this intent's rows
    // change, not on a timer. Its first update is read too: the intent may have changed
    // between the first read and the start of the watch.
    const stop = watchFleet(
      namespace,
      (fleet) => {
        const mine = JSON.stringify(fleet.rows.filter((r) => r.kind === kind && r.name === name));
        if (mine !== seen) load();
        seen = mine;
      },
      () => undefined, // the page's own read says why, if the hub refuses
    );
    return () => {
      live = false;
      stop();
    };
  }, [kind, namespace, name]);

  return (
    <PageSection>
      <Breadcrumb>
        <BreadcrumbItem to={`/?namespace=${encodeURIComponent(namespace)}`}>Fleet</BreadcrumbItem>
        <BreadcrumbItem isActive>
          {namespace}/{name}
        </BreadcrumbItem>
      </Breadcrumb>
      <Title headingLevel="h1">
        {kind} {namespace}/{name} {page && <PhaseLabel phase={page.phase} />}
      </Title>
      {error && (
        <Alert variant="danger" isInline title="The hub refused" data-testid="intent-error">
          {error}
        </Alert>
      )}
      {page && (
        <>
          {kind === "ModelServing" && (
            <Button
              component="a"
              variant="secondary"
              href={`/stack?namespace=${encodeURIComponent(namespace)}&name=${encodeURIComponent(name)}`}
            >
              Edit the stack
            </Button>
          )}
          {kind === "MultiClusterInferenceService" && (
            <Button
              component="a"
              variant="secondary"
              href={`/model?namespace=${encodeURIComponent(namespace)}&name=${encodeURIComponent(name)}`}
            >
              Edit the model
            </Button>
          )}{" "}
          <Button
            variant="danger"
            onClick={() => {
              if (!window.confirm(`Remove ${kind} ${namespace}/${name} from every cluster?`)) return;
              remove(kind, namespace, name)
                .then(() => {
                  window.location.href = `/?namespace=${encodeURIComponent(namespace)}`;
                })
                .catch((err: Error) => setError(err.message));
            }}
          >
            Remove
          </Button>
          <Content component="p" data-testid="ready">
            Ready: {page.ready.status}
            {page.ready.reason && ` (${page.ready.reason})`}
            {page.ready.message && `: ${page.ready.message}`}
          </Content>
          <RowsTable
            rows={page.rows}
            label="Clusters"
            columns={["Cluster", "Phase", "Ready", "Revision", "URL", "Why not"]}
          />
          <Title headingLevel="h2">Why, cluster by cluster</Title>
          {Object.entries(page.chains).map(([cluster, links]) => (
            <Chain key={cluster} cluster={cluster} links={links} />
          ))}
          {page.rollout && (
            <>
              <Title headingLevel="h2">Rollout</Title>
              <ActionList>
                {["pause", "resume", "approve", "undo"].map((action) => (
                  <ActionListItem key={action}>
                    <Button
                      variant="secondary"
                      onClick={() =>
                        rolloutAction(kind, namespace, name, action)
                          .then((done) => setNotice({ ok: true, text: done }))
                          .catch((err: Error) => setNotice({ ok: false, text: err.message }))
                      }
                    >
                      {action[0].toUpperCase() + action.slice(1)}
                    </Button>
                  </ActionListItem>
                ))}
              </ActionList>
              {notice && (
                <Alert
                  variant={notice.ok ? "success" : "warning"}
                  isInline
                  isPlain
                  title={notice.text}
                  data-testid="rollout-notice"
                />
              )}
              <CodeBlock>
                <CodeBlockCode data-testid="rollout">{page.rollout}</CodeBlockCode>
              </CodeBlock>
            </>
          )}
          <Title headingLevel="h2">Events</Title>
          {page.eventsRefused ? (
            <Alert variant="info" isInline isPlain title="Events not shown">
              {page.eventsRefused}
            </Alert>
          ) : page.events.length === 0 ? (
            <Content component="p">No events.</Content>
          ) : (
            <Table aria-label="Events" variant="compact">
              <Thead>
                <Tr>
                  <Th>Type</Th>
                  <Th>Reason</Th>
                  <Th>Message</Th>
                  <Th>Count</Th>
                  <Th>Last</Th>
                </Tr>
              </Thead>
              <Tbody>
                {page.events.map((e, i) => (
                  <Tr key={i}>
                    <Td>{e.type}</Td>
                    <Td>{e.reason}</Td>
                    <Td>{e.message}</Td>
                    <Td>{e.count}</Td>
                    <Td>{e.last}</Td>
                  </Tr>
                ))}
              </Tbody>
            </Table>
          )}
        </>
      )}
    </PageSection>
  );
}
