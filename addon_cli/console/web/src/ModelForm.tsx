// "Deploy a model": the form writes the MultiClusterInferenceService a YAML user would, shows
// that YAML before it is applied, and puts the hub's refusals next to the fields they name
// (issue 33, item 2).
import { useMemo, useState } from "react";
import {
  ActionGroup,
  Alert,
  Button,
  Form,
  FormGroup,
  FormHelperText,
  HelperText,
  HelperTextItem,
  PageSection,
  TextInput,
  Title,
} from "@patternfly/react-core";
import { Refused, apply, intentHref } from "./api";
import { FieldErrors, PlacementPicker, YamlToggle, asRefused, usePlacements } from "./FormParts";

interface Fields {
  name: string;
  placement: string;
  targetNamespace: string;
  modelFormat: string;
  runtime: string;
  storageUri: string;
  storageConnection: string;
}

/** Each text field: its label, help, and the path the hub names it by. */
const TEXT: [keyof Fields, string, string, string][] = [
  ["name", "Name", "the model's name in this namespace", "metadata.name"],
  ["targetNamespace", "Spoke namespace", "where the model runs on each cluster", "spec.targetNamespace"],
  ["modelFormat", "Model format", "sklearn, xgboost, onnx, ...", "spec.template.predictor.model.modelFormat"],
  ["runtime", "Runtime", "empty: the one KServe picks for the format", "spec.template.predictor.model.runtime"],
  ["storageUri", "Storage URI", "s3://bucket/path or another URI KServe reads", "spec.template.predictor.model.storageUri"],
  ["storageConnection", "Storage connection", "a StorageConnection of this namespace (optional)", "spec.storageConnections"],
];

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
  const [refused, setRefused] = useState<Refused | null>(null);
  const [error, setError] = useState("");
  const choices = usePlacements(
    namespace,
    (first) => setFields((f) => ({ ...f, placement: f.placement || first })),
    (err) => setError(err.message),
  );
  const object = useMemo(() => modelObject(namespace, fields), [namespace, fields]);
  const named = new Set(TEXT.map(([, , , path]) => path));
  const elsewhere = (refused?.causes ?? []).filter(
    (c) => c.field !== "spec.placementRef" && ![...named].some((p) => c.field === p || c.field.startsWith(`${p}.`)),
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
          {elsewhere.map((c, i) => (
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
            .catch((err: Error) => setRefused(asRefused(err)));
        }}
      >
        {TEXT.map(([key, label, help, path]) => (
          <FormGroup key={key} label={label} fieldId={`model-${key}`}>
            <TextInput
              id={`model-${key}`}
              value={fields[key]}
              onChange={(_e, v) => setFields((f) => ({ ...f, [key]: v }))}
            />
            <FormHelperText>
              <HelperText>
                <FieldErrors refused={refused} prefix={path} id={key} />
                <HelperTextItem>{help}</HelperTextItem>
              </HelperText>
            </FormHelperText>
          </FormGroup>
        ))}
        <PlacementPicker
          id="model-placement"
          choices={choices}
          value={fields.placement}
          onChange={(v) => setFields((f) => ({ ...f, placement: v }))}
        />
        <ActionGroup>
          <Button type="submit" variant="primary">
            Deploy
          </Button>
          <YamlToggle object={object} />
        </ActionGroup>
      </Form>
    </PageSection>
  );
}
