// "Deploy a model": the form writes the MultiClusterInferenceService a YAML user would, shows
// that YAML before it is applied, and puts the hub's refusals next to the fields they name
// (issue 33, item 2).
import { useEffect, useMemo, useState } from "react";
import {
  ActionGroup,
  Alert,
  Button,
  ClipboardCopy,
  ClipboardCopyVariant,
  Form,
  FormGroup,
  FormHelperText,
  FormSelect,
  FormSelectOption,
  HelperText,
  HelperTextItem,
  PageSection,
  TextInput,
  Title,
} from "@patternfly/react-core";
import { stringify } from "yaml";
import { Cause, Placement, Refused, apply, intentHref, placements } from "./api";

interface Fields {
  name: string;
  placement: string;
  targetNamespace: string;
  modelFormat: string;
  runtime: string;
  storageUri: string;
  storageConnection: string;
}

const FIELD_PATHS: Record<keyof Fields, string[]> = {
  name: ["metadata.name"],
  placement: ["spec.placementRef"],
  targetNamespace: ["spec.targetNamespace"],
  modelFormat: ["spec.template.predictor.model.modelFormat"],
  runtime: ["spec.template.predictor.model.runtime"],
  storageUri: ["spec.template.predictor.model.storageUri"],
  storageConnection: ["spec.storageConnections"],
};

/** The object the form stands for: what `kubectl apply -f` of its YAML would write. */
export function modelObject(namespace: string, f: Fields): object {
  const model: Record<string, unknown> = { modelFormat: { name: f.modelFormat } };
  if (f.runtime) model.runtime = f.runtime;
  if (f.storageUri) model.storageUri = f.storageUri;
  const spec: Record<string, unknown> = {
    placementRef: { name: f.placement },
    targetNamespace: f.targetNamespace,
    template: { predictor: { model } },
  };
  if (f.storageConnection) spec.storageConnections = [f.storageConnection];
  return {
    apiVersion: "modelserving.opendatahub.io/v1alpha1",
    kind: "MultiClusterInferenceService",
    metadata: { name: f.name, namespace },
    spec,
  };
}

/** The hub's causes that name this field (its path, or a path below it). */
function causesOf(causes: Cause[], field: keyof Fields): Cause[] {
  return causes.filter((c) =>
    FIELD_PATHS[field].some((p) => c.field === p || c.field.startsWith(`${p}.`) || c.field.startsWith(`${p}[`)),
  );
}

export function ModelForm({ namespace }: { namespace: string }) {
  const [fields, setFields] = useState<Fields>({
    name: "",
    placement: "",
    targetNamespace: namespace,
    modelFormat: "sklearn",
    runtime: "",
    storageUri: "",
    storageConnection: "",
  });
  const [choices, setChoices] = useState<Placement[]>([]);
  const [showYaml, setShowYaml] = useState(false);
  const [refused, setRefused] = useState<Refused | null>(null);
  const [error, setError] = useState("");

  useEffect(() => {
    placements(namespace)
      .then((found) => {
        setChoices(found);
        if (found.length) setFields((f) => ({ ...f, placement: f.placement || found[0].name }));
      })
      .catch((err: Error) => setError(err.message));
  }, [namespace]);

  const object = useMemo(() => modelObject(namespace, fields), [namespace, fields]);
  const set = (key: keyof Fields) => (_event: unknown, value: string) =>
    setFields((f) => ({ ...f, [key]: value }));
  const causes = refused?.causes ?? [];
  const placed = choices.find((p) => p.name === fields.placement);
  const named = new Set(
    (Object.keys(FIELD_PATHS) as (keyof Fields)[]).flatMap((k) => causesOf(causes, k)),
  );
  const unnamed = causes.filter((c) => !named.has(c));

  const field = (key: keyof Fields, label: string, help: string, input: React.ReactNode) => {
    const mine = causesOf(causes, key);
    return (
      <FormGroup label={label} fieldId={`model-${key}`}>
        {input}
        <FormHelperText>
          <HelperText>
            {mine.length ? (
              mine.map((c, i) => (
                <HelperTextItem key={i} variant="error" data-testid={`error-${key}`}>
                  {c.message}
                </HelperTextItem>
              ))
            ) : (
              <HelperTextItem>{help}</HelperTextItem>
            )}
          </HelperText>
        </FormHelperText>
      </FormGroup>
    );
  };
  const text = (key: keyof Fields) => (
    <TextInput
      id={`model-${key}`}
      value={fields[key]}
      onChange={set(key)}
      validated={causesOf(causes, key).length ? "error" : "default"}
    />
  );

  return (
    <PageSection>
      <Title headingLevel="h1">Deploy a model in {namespace}</Title>
      {error && (
        <Alert variant="danger" isInline title="The hub refused">
          {error}
        </Alert>
      )}
      {refused && (
        <Alert variant="danger" isInline title="Not created" data-testid="form-refused">
          {refused.message}
          {unnamed.map((c, i) => (
            <div key={i}>
              {c.field}: {c.message}
            </div>
          ))}
        </Alert>
      )}
      <Form
        onSubmit={(event) => {
          event.preventDefault();
          setRefused(null);
          apply(object)
            .then((done) => {
              window.location.href = intentHref(done.kind, done.namespace, done.name);
            })
            .catch((err: Error) =>
              setRefused(err instanceof Refused ? err : new Refused(err.message, [])),
            );
        }}
      >
        {field("name", "Name", "the model's name in this namespace", text("name"))}
        {field(
          "placement",
          "Clusters (Placement)",
          placed ? `chooses ${placed.clusters.join(", ") || "no cluster yet"}` : "a Placement of this namespace",
          <FormSelect id="model-placement" value={fields.placement} onChange={set("placement")}>
            {choices.map((p) => (
              <FormSelectOption key={p.name} value={p.name} label={`${p.name} (${p.clusters.length} clusters)`} />
            ))}
          </FormSelect>,
        )}
        {field("targetNamespace", "Spoke namespace", "where the model runs on each cluster", text("targetNamespace"))}
        {field("modelFormat", "Model format", "sklearn, xgboost, onnx, ...", text("modelFormat"))}
        {field("runtime", "Runtime", "empty: the one KServe picks for the format", text("runtime"))}
        {field("storageUri", "Storage URI", "s3://bucket/path or another URI KServe reads", text("storageUri"))}
        {field("storageConnection", "Storage connection", "a StorageConnection of this namespace (optional)", text("storageConnection"))}
        <ActionGroup>
          <Button type="submit" variant="primary">
            Deploy
          </Button>
          <Button variant="secondary" onClick={() => setShowYaml(!showYaml)}>
            {showYaml ? "Hide YAML" : "View YAML"}
          </Button>
        </ActionGroup>
      </Form>
      {showYaml && (
        <ClipboardCopy
          isCode
          isReadOnly
          hoverTip="Copy"
          clickTip="Copied"
          variant={ClipboardCopyVariant.expansion}
          isExpanded
          data-testid="yaml"
        >
          {stringify(object)}
        </ClipboardCopy>
      )}
    </PageSection>
  );
}
