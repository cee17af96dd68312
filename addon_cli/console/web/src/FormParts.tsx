// What every form of the console shares: the Placement picker, the hub's refusals (at their
// fields, and whole), and the YAML the form will write.
import { useEffect, useState } from "react";
import {
  Alert,
  Button,
  ClipboardCopy,
  ClipboardCopyVariant,
  FormGroup,
  FormHelperText,
  FormSelect,
  FormSelectOption,
  HelperText,
  HelperTextItem,
} from "@patternfly/react-core";
import { stringify } from "yaml";
import { Placement, Refused, placements } from "./api";

/** The namespace's Placements; `pick` is called with the first one when there is one. */
export function usePlacements(
  namespace: string,
  pick: (name: string) => void,
  onError: (err: Error) => void,
): Placement[] {
  const [choices, setChoices] = useState<Placement[]>([]);
  useEffect(() => {
    placements(namespace)
      .then((found) => {
        setChoices(found);
        if (found.length) pick(found[0].name);
      })
      .catch(onError);
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [namespace]);
  return choices;
}

/** The Placement that chooses the clusters, with the clusters it chose. */
export function PlacementPicker(props: {
  id: string;
  choices: Placement[];
  value: string;
  onChange: (value: string) => void;
}) {
  const placed = props.choices.find((p) => p.name === props.value);
  return (
    <FormGroup label="Clusters (Placement)" fieldId={props.id}>
      <FormSelect id={props.id} value={props.value} onChange={(_e, v) => props.onChange(v)}>
        {props.choices.map((p) => (
          <FormSelectOption key={p.name} value={p.name} label={`${p.name} (${p.clusters.length} clusters)`} />
        ))}
      </FormSelect>
      <FormHelperText>
        <HelperText>
          <HelperTextItem>
            {placed ? `chooses ${placed.clusters.join(", ") || "no cluster yet"}` : "a Placement of this namespace"}
          </HelperTextItem>
        </HelperText>
      </FormHelperText>
    </FormGroup>
  );
}

/** The hub's words for the fields under `prefix` (their path or below it). */
export function FieldErrors({ refused, prefix, id }: { refused: Refused | null; prefix: string; id?: string }) {
  const mine = (refused?.causes ?? []).filter(
    (c) => c.field === prefix || c.field.startsWith(`${prefix}.`) || c.field.startsWith(`${prefix}[`),
  );
  return (
    <>
      {mine.map((c, i) => (
        <HelperTextItem key={i} variant="error" data-testid={`error-${id ?? prefix}`}>
          {c.message}
        </HelperTextItem>
      ))}
    </>
  );
}

/** The hub's refusal of a whole write. */
export function RefusedAlert({ refused, title = "Not written" }: { refused: Refused | null; title?: string }) {
  if (!refused) return null;
  return (
    <Alert variant="danger" isInline title={title} data-testid="form-refused">
      {refused.message}
    </Alert>
  );
}

/** Turns any failure into a Refused (the hub's, or a network one). */
export function asRefused(err: Error): Refused {
  return err instanceof Refused ? err : new Refused(err.message, []);
}

/** "View YAML": exactly the objects the form will write (one document each), to read or copy. */
export function YamlToggle({ object }: { object: object | object[] }) {
  const [shown, setShown] = useState(false);
  return (
    <>
      <Button variant="secondary" onClick={() => setShown(!shown)}>
        {shown ? "Hide YAML" : "View YAML"}
      </Button>
      {shown && (
        <ClipboardCopy isCode isReadOnly variant={ClipboardCopyVariant.expansion} isExpanded data-testid="yaml">
          {(Array.isArray(object) ? object : [object]).map((o) => stringify(o)).join("---\n")}
        </ClipboardCopy>
      )}
    </>
  );
}
