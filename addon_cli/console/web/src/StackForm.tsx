// The serving stack on clusters (a ModelServing): install it where a Placement chooses, turn
// serving namespaces on or off, remove it (managementState Removed: the manager's removal
// guard answers on the stack's page). A platform admin's action: a tenant's attempt gets the
// hub's refusal (issue 33, item 2).
import { useEffect, useMemo, useState } from "react";
import {
  ActionGroup,
  Alert,
  Button,
  Form,
  FormGroup,
  FormHelperText,
  FormSelect,
  FormSelectOption,
  HelperText,
  Label,
  LabelGroup,
  PageSection,
  TextInput,
  Title,
} from "@patternfly/react-core";
import { Refused, apply, intentHref, intentPage } from "./api";
import { FieldErrors, PlacementPicker, RefusedAlert, YamlToggle, asRefused, usePlacements } from "./FormParts";

interface Stack {
  name: string;
  platform: string;
  placement: string;
  servingNamespaces: string[];
  version: string;
  removed: boolean;
}

/** The ModelServing the form stands for. */
export function stackObject(namespace: string, s: Stack): object {
  const spec: Record<string, unknown> = {
    platform: s.platform,
    placementRef: { name: s.placement },
    servingNamespaces: s.servingNamespaces,
    managementState: s.removed ? "Removed" : "Managed",
  };
  if (s.version) spec.version = s.version;
  return {
    apiVersion: "modelserving.opendatahub.io/v1alpha1",
    kind: "ModelServing",
    metadata: { name: s.name, namespace },
    spec,
  };
}

export function StackForm({ namespace, name }: { namespace: string; name: string }) {
  const [stack, setStack] = useState<Stack>({
    name,
    platform: "KServe",
    placement: "",
    servingNamespaces: [],
    version: "",
    removed: false,
  });
  const [adding, setAdding] = useState("");
  // Editing: nothing is written before the stack is read (it would write the form's defaults).
  const [loaded, setLoaded] = useState(!name);
  const [refused, setRefused] = useState<Refused | null>(null);
  const [error, setError] = useState("");
  const choices = usePlacements(
    namespace,
    (first) => setStack((s) => ({ ...s, placement: s.placement || first })),
    (err) => setError(err.message),
  );

  useEffect(() => {
    if (name) {
      intentPage("ModelServing", namespace, name)
        .then((page) => {
          const spec = page.spec as {
            platform?: string;
            placementRef?: { name?: string };
            servingNamespaces?: string[];
            version?: string;
            managementState?: string;
          };
          setStack({
            name,
            platform: spec.platform ?? "KServe",
            placement: spec.placementRef?.name ?? "",
            servingNamespaces: spec.servingNamespaces ?? [],
            version: spec.version ?? "",
            removed: spec.managementState === "Removed",
          });
          setLoaded(true);
        })
        .catch((err: Error) => setError(err.message));
    }
  }, [namespace, name]);

  const object = useMemo(() => stackObject(namespace, stack), [namespace, stack]);
  const write = (next: Stack) => {
    setRefused(null);
    apply(stackObject(namespace, next))
      .then((done) => {
        window.location.href = intentHref(done.kind, done.namespace, done.name);
      })
      .catch((err: Error) => setRefused(asRefused(err)));
  };

  return (
    <PageSection>
      <Title headingLevel="h1">
        {name ? `The stack ${namespace}/${name}` : `Install the serving stack from ${namespace}`}
      </Title>
      {error && (
        <Alert variant="danger" isInline title="The hub refused">
          {error}
        </Alert>
      )}
      <RefusedAlert refused={refused} />
      <Form
        onSubmit={(event) => {
          event.preventDefault();
          write(stack);
        }}
      >
        <FormGroup label="Name" fieldId="stack-name">
          <TextInput
            id="stack-name"
            value={stack.name}
            isDisabled={Boolean(name)}
            onChange={(_e, v) => setStack((x) => ({ ...x, name: v }))}
          />
        </FormGroup>
        <FormGroup label="Platform" fieldId="stack-platform">
          <FormSelect
            id="stack-platform"
            value={stack.platform}
            onChange={(_e, v) => setStack((x) => ({ ...x, platform: v }))}
          >
            <FormSelectOption value="KServe" label="KServe (Standard, headless)" />
            <FormSelectOption value="ModelMesh" label="ModelMesh Serving (deprecated upstream)" />
          </FormSelect>
        </FormGroup>
        <PlacementPicker
          id="stack-placement"
          choices={choices}
          value={stack.placement}
          onChange={(v) => setStack((x) => ({ ...x, placement: v }))}
        />
        <FormGroup label="Serving namespaces" fieldId="stack-namespace">
          <LabelGroup numLabels={20} data-testid="serving-namespaces">
            {stack.servingNamespaces.map((ns) => (
              <Label
                key={ns}
                onClose={() =>
                  setStack((x) => ({ ...x, servingNamespaces: x.servingNamespaces.filter((y) => y !== ns) }))
                }
                closeBtnAriaLabel={`Turn serving off in ${ns}`}
              >
                {ns}
              </Label>
            ))}
          </LabelGroup>
          <TextInput
            id="stack-namespace"
            aria-label="Serving namespace to turn on"
            value={adding}
            onChange={(_e, v) => setAdding(v)}
          />
          <Button
            variant="link"
            onClick={() => {
              const ns = adding.trim();
              if (ns && !stack.servingNamespaces.includes(ns))
                setStack((x) => ({ ...x, servingNamespaces: [...x.servingNamespaces, ns] }));
              setAdding("");
            }}
          >
            Turn serving on
          </Button>
          <FormHelperText>
            <HelperText>
              <FieldErrors refused={refused} prefix="spec.servingNamespaces" id="servingNamespaces" />
            </HelperText>
          </FormHelperText>
        </FormGroup>
        <FormGroup label="Version" fieldId="stack-version">
          <TextInput
            id="stack-version"
            value={stack.version}
            placeholder="empty: the newest the agents carry"
            onChange={(_e, v) => setStack((x) => ({ ...x, version: v }))}
          />
        </FormGroup>
        {stack.removed && (
          <Alert variant="info" isInline isPlain title="Removed: the stack is being (or was) removed from its clusters" />
        )}
        <ActionGroup>
          <Button type="submit" variant="primary" isDisabled={!loaded}>
            {name ? "Save" : "Install"}
          </Button>
          {name && !stack.removed && (
            <Button variant="danger" isDisabled={!loaded} onClick={() => write({ ...stack, removed: true })}>
              Remove the stack
            </Button>
          )}
          <YamlToggle object={object} />
        </ActionGroup>
      </Form>
    </PageSection>
  );
}
