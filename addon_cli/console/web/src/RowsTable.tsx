// The command line's rows (an intent on a cluster) as a table: each page shows the columns it
// needs of one set.
import type { ReactNode } from "react";
import { Table, Tbody, Td, Th, Thead, Tr } from "@patternfly/react-table";
import { Row, intentHref } from "./api";
import { PhaseLabel } from "./PhaseLabel";

const COLUMNS: Record<string, (row: Row) => ReactNode> = {
  Kind: (r) => r.kind,
  Namespace: (r) => r.namespace,
  Name: (r) => <a href={intentHref(r.kind, r.namespace, r.name)}>{r.name}</a>,
  Cluster: (r) => r.cluster,
  Phase: (r) => <PhaseLabel phase={r.phase} />,
  Ready: (r) => (r.ready ? "yes" : "no"),
  Revision: (r) => r.revision,
  URL: (r) => r.external_url || r.url,
  "Why not": (r) => r.detail,
};

export type Column = keyof typeof COLUMNS;

export function RowsTable(props: { rows: Row[]; columns: Column[]; label: string; testId?: string }) {
  return (
    <Table aria-label={props.label} variant="compact" data-testid={props.testId}>
      <Thead>
        <Tr>
          {props.columns.map((c) => (
            <Th key={c}>{c}</Th>
          ))}
        </Tr>
      </Thead>
      <Tbody>
        {props.rows.map((row) => (
          <Tr key={`${row.kind}/${row.namespace}/${row.name}/${row.cluster}`}>
            {props.columns.map((c) => (
              <Td key={c} dataLabel={c}>
                {COLUMNS[c](row)}
              </Td>
            ))}
          </Tr>
        ))}
      </Tbody>
    </Table>
  );
}
