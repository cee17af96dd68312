// The managed clusters (add-on health, stack and version, intents), and one cluster's page
// with what runs there (issue 33, item 1). Reading clusters takes the viewer role or more.
import { useEffect, useState } from "react";
import { Alert, Label, LabelGroup, PageSection, Title } from "@patternfly/react-core";
import { Table, Tbody, Td, Th, Thead, Tr } from "@patternfly/react-table";
import { ClusterPage, ClusterRow, clusterPage, clusters } from "./api";
import { RowsTable } from "./RowsTable";

function Health({ value }: { value: string }) {
  const color = value === "True" ? "green" : value === "-" ? "grey" : "red";
  return <Label color={color}>{value === "-" ? "not enabled" : value}</Label>;
}

export function ClustersView() {
  const [rows, setRows] = useState<ClusterRow[] | null>(null);
  const [error, setError] = useState("");
  useEffect(() => {
    clusters().then(setRows).catch((err: Error) => setError(err.message));
  }, []);
  return (
    <PageSection>
      <Title headingLevel="h1">Clusters</Title>
      {error && (
        <Alert variant="danger" isInline title="The hub refused" data-testid="clusters-error">
          {error}
        </Alert>
      )}
      {rows && (
        <Table aria-label="Managed clusters" variant="compact" data-testid="clusters">
          <Thead>
            <Tr>
              <Th>Cluster</Th>
              <Th>Available</Th>
              <Th>Add-on</Th>
              <Th>Stack</Th>
              <Th>Version</Th>
              <Th>Intents</Th>
              <Th>Stale</Th>
            </Tr>
          </Thead>
          <Tbody>
            {rows.map((r) => (
              <Tr key={r.name}>
                <Td dataLabel="Cluster">
                  <a href={`/cluster?name=${encodeURIComponent(r.name)}`}>{r.name}</a>
                </Td>
                <Td dataLabel="Available">
                  <Health value={r.available} />
                </Td>
                <Td dataLabel="Add-on">
                  <Health value={r.addon} />
                </Td>
                <Td dataLabel="Stack">{r.platform}</Td>
                <Td dataLabel="Version">{r.version}</Td>
                <Td dataLabel="Intents">{r.intents}</Td>
                <Td dataLabel="Stale">{r.stale ? "yes" : "no"}</Td>
              </Tr>
            ))}
          </Tbody>
        </Table>
      )}
    </PageSection>
  );
}

export function ClusterView({ name }: { name: string }) {
  const [page, setPage] = useState<ClusterPage | null>(null);
  const [error, setError] = useState("");
  useEffect(() => {
    clusterPage(name).then(setPage).catch((err: Error) => setError(err.message));
  }, [name]);
  return (
    <PageSection>
      <Title headingLevel="h1">Cluster {name}</Title>
      {error && (
        <Alert variant="danger" isInline title="The hub refused">
          {error}
        </Alert>
      )}
      {page && (
        <>
          <p data-testid="cluster-summary">
            available <Health value={page.cluster.available} /> add-on{" "}
            <Health value={page.cluster.addon} /> stack {page.cluster.platform} {page.cluster.version}
          </p>
          <LabelGroup numLabels={12}>
            {Object.entries(page.labels).map(([k, v]) => (
              <Label key={k} variant="outline">
                {k}={v}
              </Label>
            ))}
          </LabelGroup>
          <Title headingLevel="h2">What runs here</Title>
          <RowsTable
            rows={page.rows}
            label="Intents on this cluster"
            testId="cluster-intents"
            columns={["Kind", "Namespace", "Name", "Phase", "Ready", "Why not"]}
          />
        </>
      )}
    </PageSection>
  );
}
