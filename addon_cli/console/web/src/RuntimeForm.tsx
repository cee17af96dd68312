// A model server of your own on the clusters (a MultiClusterServingRuntime). KServe's built-in
// runtimes are already on every cluster with the stack: a model names one in its form; this
// form is for another image, arguments or resources (issue 33, item 2).
import { useMemo, useState } from "react";
import {
  ActionGroup,
  Button,
  Checkbox,
  Form,
  FormGroup,
  FormHelperText,
  HelperText,
  PageSection,
  TextArea,
  TextInput,
  Title,
} from "@patternfly/react-core";
import { Refused, apply, intentHref } from "./api";
import { FieldErrors, PlacementPicker, RefusedAlert, YamlToggle, asRefused, usePlacements } from "./FormParts";

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
  const [refused, setRefused] = useState<Refused | null>(null);
  const choices = usePlacements(
    namespace,
    (first) => setF((x) => ({ ...x, placement: x.placement || first })),
    (err) => setRefused(asRefused(err)),
  );

  const object = useMemo(() => runtimeObject(namespace, f), [namespace, f]);
  // Updates from the previous state: the placements arrive while the user types, and an
  // update from a render before their arrival would put the placement back to none.
  const set = (key: keyof Fields) => (_e: unknown, v: string) => setF((x) => ({ ...x, [key]: v }));
  const errors = (prefix: string) => <FieldErrors refused={refused} prefix={prefix} />;

  return (
    <PageSection>
      <Title headingLevel="h1">A model server in {namespace}</Title>
      <RefusedAlert refused={refused} />
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
        <FormGroup label="Name" fieldId="runtime-name">
          <TextInput id="runtime-name" value={f.name} onChange={set("name")} />
          <FormHelperText>
            <HelperText>{errors("metadata.name")}</HelperText>
          </FormHelperText>
        </FormGroup>
        <PlacementPicker id="runtime-placement" choices={choices} value={f.placement} onChange={(v) => setF((x) => ({ ...x, placement: v }))} />
        <FormGroup label="Spoke namespace" fieldId="runtime-targetNamespace">
          <TextInput id="runtime-targetNamespace" value={f.targetNamespace} onChange={set("targetNamespace")} />
          <FormHelperText>
            <HelperText>{errors("spec.targetNamespace")}</HelperText>
          </FormHelperText>
        </FormGroup>
        <FormGroup label="Model format" fieldId="runtime-format">
          <TextInput id="runtime-format" value={f.format} onChange={set("format")} />
        </FormGroup>
        <FormGroup fieldId="runtime-autoselect" label="Default runtime">
          <Checkbox
            id="runtime-autoselect"
            label="Chosen for this format when a model names no runtime"
            isChecked={f.autoSelect}
            onChange={(_e, v) => setF((x) => ({ ...x, autoSelect: v }))}
          />
        </FormGroup>
        <FormGroup label="Protocols" fieldId="runtime-v1" role="group" isInline>
          <Checkbox id="runtime-v1" label="v1" isChecked={f.v1} onChange={(_e, v) => setF((x) => ({ ...x, v1: v }))} />
          <Checkbox id="runtime-v2" label="v2 (open inference)" isChecked={f.v2} onChange={(_e, v) => setF((x) => ({ ...x, v2: v }))} />
        </FormGroup>
        <FormGroup label="Image" fieldId="runtime-image">
          <TextInput id="runtime-image" value={f.image} onChange={set("image")} />
          <FormHelperText>
            <HelperText>{errors("spec.template.containers")}</HelperText>
          </FormHelperText>
        </FormGroup>
        <FormGroup label="Arguments (one per line)" fieldId="runtime-args">
          <TextArea id="runtime-args" value={f.args} onChange={(_e, v) => setF((x) => ({ ...x, args: v }))} rows={4} />
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
          <YamlToggle object={object} />
        </ActionGroup>
      </Form>
    </PageSection>
  );
}
