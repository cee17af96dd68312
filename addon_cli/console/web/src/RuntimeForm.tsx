// A model server of your own on the clusters (a MultiClusterServingRuntime). KServe's built-in
// runtimes are already on every cluster with the stack: a model names one in its form; this
// form is for another image, arguments or resources (issue 33, item 2).
import { useEffect, useMemo, useState } from "react";
import {
  ActionGroup,
  Alert,
  Button,
  Checkbox,
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
  TextArea,
  TextInput,
  Title,
} from "@patternfly/react-core";
import { stringify } from "yaml";
import { Placement, Refused, apply, intentHref, placements } from "./api";

interface Fields {
  name: string;
  placement: string;
  targetNamespace: string;
  format: string;
  autoSelect: boolean;
  v1: boolean;
  v2: boolean;
  image: string;
  args: string;
  cpu: string;
  memory: string;
}

export function runtimeObject(namespace: string, f: Fields): object {
  const resources = { requests: { cpu: f.cpu, memory: f.memory }, limits: { memory: f.memory } };
  return {
    apiVersion: "modelserving.opendatahub.io/v1alpha1",
    kind: "MultiClusterServingRuntime",
    metadata: { name: f.name, namespace },
    spec: {
      placementRef: { name: f.placement },
      targetNamespace: f.targetNamespace,
      template: {
        supportedModelFormats: [{ name: f.format, autoSelect: f.autoSelect }],
        protocolVersions: [...(f.v1 ? ["v1"] : []), ...(f.v2 ? ["v2"] : [])],
        containers: [
          {
            name: "kserve-container",
            image: f.image,
            args: f.args.split("\n").map((a) => a.trim()).filter(Boolean),
            resources,
          },
        ],
      },
    },
  };
}

export function RuntimeForm({ namespace }: { namespace: string }) {
  const [f, setF] = useState<Fields>({
    name: "",
    placement: "",
    targetNamespace: namespace,
    format: "sklearn",
    autoSelect: true,
    v1: true,
    v2: true,
    image: "",
    args: "--model_name={{.Name}}\n--model_dir=/mnt/models\n--http_port=8080",
    cpu: "500m",
    memory: "1Gi",
  });
  const [choices, setChoices] = useState<Placement[]>([]);
  const [showYaml, setShowYaml] = useState(false);
  const [refused, setRefused] = useState<Refused | null>(null);

  useEffect(() => {
    placements(namespace)
      .then((found) => {
        setChoices(found);
        if (found.length) setF((x) => ({ ...x, placement: x.placement || found[0].name }));
      })
      .catch((err: Error) => setRefused(new Refused(err.message, [])));
  }, [namespace]);

  const object = useMemo(() => runtimeObject(namespace, f), [namespace, f]);
  const set = (key: keyof Fields) => (_e: unknown, v: string) => setF({ ...f, [key]: v });
  const errors = (prefix: string) =>
    (refused?.causes ?? [])
      .filter((c) => c.field.startsWith(prefix))
      .map((c, i) => (
        <HelperTextItem key={i} variant="error" data-testid={`error-${prefix}`}>
          {c.message}
        </HelperTextItem>
      ));

  return (
    <PageSection>
      <Title headingLevel="h1">A model server in {namespace}</Title>
      {refused && (
        <Alert variant="danger" isInline title="Not written" data-testid="form-refused">
          {refused.message}
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
            .catch((err: Error) => setRefused(err instanceof Refused ? err : new Refused(err.message, [])));
        }}
      >
        <FormGroup label="Name" fieldId="runtime-name">
          <TextInput id="runtime-name" value={f.name} onChange={set("name")} />
          <FormHelperText>
            <HelperText>{errors("metadata.name")}</HelperText>
          </FormHelperText>
        </FormGroup>
        <FormGroup label="Clusters (Placement)" fieldId="runtime-placement">
          <FormSelect id="runtime-placement" value={f.placement} onChange={set("placement")}>
            {choices.map((p) => (
              <FormSelectOption key={p.name} value={p.name} label={`${p.name} (${p.clusters.length} clusters)`} />
            ))}
          </FormSelect>
        </FormGroup>
        <FormGroup label="Spoke namespace" fieldId="runtime-targetNamespace">
          <TextInput id="runtime-targetNamespace" value={f.targetNamespace} onChange={set("targetNamespace")} />
          <FormHelperText>
            <HelperText>{errors("spec.targetNamespace")}</HelperText>
          </FormHelperText>
        </FormGroup>
        <FormGroup label="Model format" fieldId="runtime-format">
          <TextInput id="runtime-format" value={f.format} onChange={set("format")} />
          <Checkbox
            id="runtime-autoselect"
            label="Chosen for this format when a model names no runtime"
            isChecked={f.autoSelect}
            onChange={(_e, v) => setF({ ...f, autoSelect: v })}
          />
        </FormGroup>
        <FormGroup label="Protocols" fieldId="runtime-v1" role="group" isInline>
          <Checkbox id="runtime-v1" label="v1" isChecked={f.v1} onChange={(_e, v) => setF({ ...f, v1: v })} />
          <Checkbox id="runtime-v2" label="v2 (open inference)" isChecked={f.v2} onChange={(_e, v) => setF({ ...f, v2: v })} />
        </FormGroup>
        <FormGroup label="Image" fieldId="runtime-image">
          <TextInput id="runtime-image" value={f.image} onChange={set("image")} />
          <FormHelperText>
            <HelperText>{errors("spec.template.containers")}</HelperText>
          </FormHelperText>
        </FormGroup>
        <FormGroup label="Arguments (one per line)" fieldId="runtime-args">
          <TextArea id="runtime-args" value={f.args} onChange={(_e, v) => setF({ ...f, args: v })} rows={4} />
        </FormGroup>
        <FormGroup label="CPU request" fieldId="runtime-cpu">
          <TextInput id="runtime-cpu" value={f.cpu} onChange={set("cpu")} />
        </FormGroup>
        <FormGroup label="Memory" fieldId="runtime-memory">
          <TextInput id="runtime-memory" value={f.memory} onChange={set("memory")} />
        </FormGroup>
        <ActionGroup>
          <Button type="submit" variant="primary">
            Create the model server
          </Button>
          <Button variant="secondary" onClick={() => setShowYaml(!showYaml)}>
            {showYaml ? "Hide YAML" : "View YAML"}
          </Button>
        </ActionGroup>
      </Form>
      {showYaml && (
        <ClipboardCopy isCode isReadOnly variant={ClipboardCopyVariant.expansion} isExpanded data-testid="yaml">
          {stringify(object)}
        </ClipboardCopy>
      )}
    </PageSection>
  );
}
