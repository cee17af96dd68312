// The fleet view: every intent on every cluster, live, filterable (issue 33, item 1).
import { useEffect, useMemo, useState } from "react";
import {
  Alert,
  Button,
  InputGroup,
  InputGroupItem,
  PageSection,
  SearchInput,
  TextInput,
  Title,
  Toolbar,
  ToolbarContent,
  ToolbarItem,
} from "@patternfly/react-core";
import { Fleet, Row, watchFleet } from "./api";
import { RowsTable } from "./RowsTable";

/** What can be written in the namespace shown: each form's address and its button. */
const ACTIONS: [string, string][] = [
  ["/new-model", "Deploy a model"],
  ["/stack", "Install the stack"],
  ["/new-storage", "Storage credentials"],
  ["/new-runtime", "Model server"],
];

function matches(row: Row, text: string): boolean {
  if (!text) return true;
  const needle = text.toLowerCase();
  return [row.kind, row.namespace, row.name, row.cluster, row.phase, row.detail, row.reason]
    .some((cell) => cell.toLowerCase().includes(needle));
}

function initialNamespace(): string {
  return new URLSearchParams(window.location.search).get("namespace") ?? "";
}

export function FleetView() {
  const [namespace, setNamespace] = useState(initialNamespace);
  const [draft, setDraft] = useState(initialNamespace);
  const [fleet, setFleet] = useState<Fleet | null>(null);
  const [error, setError] = useState("");
  const [filter, setFilter] = useState("");

  useEffect(() => {
    setFleet(null);
    setError("");
    const url = new URL(window.location.href);
    if (namespace) url.searchParams.set("namespace", namespace);
    else url.searchParams.delete("namespace");
    window.history.replaceState(null, "", url);
    return watchFleet(namespace, setFleet, setError);
  }, [namespace]);

  const rows = useMemo(() => (fleet?.rows ?? []).filter((r) => matches(r, filter)), [
    fleet,
    filter,
  ]);

  return (
    <PageSection>
      <Title headingLevel="h1">Fleet</Title>
      <Toolbar>
        <ToolbarContent>
          <ToolbarItem>
            <form
              onSubmit={(event) => {
                event.preventDefault();
                setNamespace(draft.trim());
              }}
            >
              <InputGroup>
                <InputGroupItem isFill>
                  <TextInput
                    id="namespace"
                    aria-label="Hub namespace (empty: every namespace)"
                    placeholder="hub namespace (empty: all)"
                    value={draft}
                    onChange={(_event, value) => setDraft(value)}
                  />
                </InputGroupItem>
                <InputGroupItem>
                  <Button type="submit" variant="control">
                    Show
                  </Button>
                </InputGroupItem>
              </InputGroup>
            </form>
          </ToolbarItem>
          {namespace &&
            ACTIONS.map(([path, label], i) => (
              <ToolbarItem key={path}>
                <Button
                  component="a"
                  href={`${path}?namespace=${encodeURIComponent(namespace)}`}
                  variant={i === 0 ? "primary" : "secondary"}
                >
                  {label}
                </Button>
              </ToolbarItem>
            ))}
          <ToolbarItem>
            <SearchInput
              aria-label="Filter the rows"
              placeholder="filter: name, cluster, phase, reason"
              value={filter}
              onChange={(_event, value) => setFilter(value)}
              onClear={() => setFilter("")}
            />
          </ToolbarItem>
        </ToolbarContent>
      </Toolbar>
      {error && (
        <Alert variant="danger" isInline title="The hub refused" data-testid="fleet-error">
          {error}
        </Alert>
      )}
      {Object.entries(fleet?.refused ?? {}).map(([kind, message]) => (
        <Alert key={kind} variant="info" isInline isPlain title={`${kind}: not shown`}>
          {message}
        </Alert>
      ))}
      {fleet && (
        <RowsTable
          rows={rows}
          label="Intents on each cluster"
          testId="fleet"
          columns={["Kind", "Namespace", "Name", "Cluster", "Phase", "Ready", "Revision", "URL", "Why not"]}
        />
      )}
      {fleet && rows.length === 0 && <p>No intents here.</p>}
    </PageSection>
  );
}
