// "Deploy a model": the form writes the MultiClusterInferenceService a YAML user would (and,
// for an explicit list of clusters, the Placement that names them), shows that YAML before it is
// applied, and puts the hub's refusals next to the fields they name (issue 33, item 2). With a
// name it edits that model: extend it to more clusters, remove it from some, change a cluster's
// replicas.
import { useEffect, useMemo, useState } from "react";
import {
  ActionGroup,
  Alert,
  Button,
  Checkbox,
  Form,
  FormGroup,
  FormHelperText,
  HelperText,
  HelperTextItem,
  PageSection,
  Radio,
  TextInput,
  Title,
} from "@patternfly/react-core";
import { Refused, apply, clusters as listClusters, intentHref, intentPage } from "./api";
import { FieldErrors, PlacementPicker, YamlToggle, asRefused, usePlacements } from "./FormParts";

const KIND = "MultiClusterInferenceService";

interface Fields {
  name: string;
  /** Clusters from a Placement of the namespace, or an explicit list (a Placement of the
   *  model's name that names them). */
  mode: "placement" | "clusters";
  placement: string;
  clusters: string[];
  /** Per-cluster minimum replicas ("" = as the template says): one override each. */
  replicas: Record<string, string>;
  /** Overrides the form does not show, written back unchanged. */
  kept: unknown[];
  targetNamespace: string;
  modelFormat: string;
  runtime: string;
  storageUri: string;
  storageConnection: string;
  storagePath: string;
}

type TextKey =
  | "name"
  | "targetNamespace"
  | "modelFormat"
  | "runtime"
  | "storageUri"
  | "storageConnection"
  | "storagePath";

/** Each text field: its label, help, and the path the hub names it by. */
const TEXT: [TextKey, string, string, string][] = [
  ["name", "Name", "the model's name in this namespace", "metadata.name"],
  ["targetNamespace", "Spoke namespace", "where the model runs on each cluster", "spec.targetNamespace"],
  ["modelFormat", "Model format", "sklearn, xgboost, onnx, ...", "spec.template.predictor.model.modelFormat"],
  ["runtime", "Runtime", "empty: the one KServe picks for the format", "spec.template.predictor.model.runtime"],
  ["storageUri", "Storage URI", "s3://bucket/path or another URI KServe reads", "spec.template.predictor.model.storageUri"],
  ["storageConnection", "Storage connection", "a StorageConnection of this namespace (optional)", "spec.storageConnections"],
  ["storagePath", "Path in the connection", "the model's path in the connection's bucket (instead of a storage URI)", "spec.template.predictor.model.storage"],
];

/** The CEL expression of a Placement that names its clusters (the backend reads it back). */
export function namingExpression(clusters: string[]): string {
  return `managedCluster.metadata.name in [${clusters.map((c) => `'${c}'`).join(", ")}]`;
}

/** The Placement an explicit list of clusters is written as. */
export function namingPlacement(namespace: string, name: string, clusters: string[]): object {
  return {
    apiVersion: "cluster.open-cluster-management.io/v1beta1",
    kind: "Placement",
    metadata: { name, namespace },
    spec: {
      predicates: [{ requiredClusterSelector: { celSelector: { celExpressions: [namingExpression(clusters)] } } }],
    },
  };
}

/** The form's overrides: one per cluster whose replicas it sets, then the kept ones. */
function overrides(f: Fields, inScope: string[]): unknown[] {
  const mine = inScope
    .filter((c) => f.replicas[c])
    .map((c) => ({
      clusterNames: [c],
      patch: { template: { predictor: { minReplicas: Number(f.replicas[c]) } } },
    }));
  return [...mine, ...f.kept];
}

/** The objects the form stands for, in the order they are applied: what `kubectl apply -f` of
 *  its YAML would write. */
export function modelObjects(namespace: string, f: Fields, inScope: string[]): object[] {
  const model: Record<string, unknown> = { modelFormat: { name: f.modelFormat } };
  if (f.runtime) model.runtime = f.runtime;
  if (f.storageUri) model.storageUri = f.storageUri;
  if (f.storageConnection && f.storagePath) model.storage = { key: f.storageConnection, path: f.storagePath };
  const spec: Record<string, unknown> = {
    placementRef: { name: f.mode === "clusters" ? f.name : f.placement },
    targetNamespace: f.targetNamespace,
    template: { predictor: { model } },
  };
  if (f.storageConnection) spec.storageConnections = [f.storageConnection];
  const patches = overrides(f, inScope);
  if (patches.length) spec.overrides = patches;
  const objects: object[] = [];
  if (f.mode === "clusters") objects.push(namingPlacement(namespace, f.name, f.clusters));
  objects.push({
    apiVersion: "modelserving.opendatahub.io/v1alpha1",
    kind: KIND,
    metadata: { name: f.name, namespace },
    spec,
  });
  return objects;
}

/** A model's overrides split into the replicas the form edits and the rest. */
function readOverrides(list: unknown[]): { replicas: Record<string, string>; kept: unknown[] } {
  const replicas: Record<string, string> = {};
  const kept: unknown[] = [];
  for (const o of list) {
    const item = o as { clusterNames?: string[]; clusterSelector?: unknown; patch?: Record<string, unknown> };
    const predictor = (item.patch?.template as { predictor?: Record<string, unknown> } | undefined)?.predictor;
    const only =
      item.clusterNames?.length === 1 &&
      !item.clusterSelector &&
      Object.keys(item.patch ?? {}).length === 1 &&
      predictor !== undefined &&
      Object.keys(predictor).length === 1 &&
      typeof predictor.minReplicas === "number";
    if (only && item.clusterNames && !(item.clusterNames[0] in replicas)) {
      replicas[item.clusterNames[0]] = String(predictor?.minReplicas);
    } else {
      kept.push(o);
    }
  }
  return { replicas, kept };
}

export function ModelForm({ namespace, name }: { namespace: string; name: string }) {
  const [fields, setFields] = useState<Fields>({
    name,
    mode: "placement",
    placement: "",
    clusters: [],
    replicas: {},
    kept: [],
    targetNamespace: namespace,
    modelFormat: "sklearn",
    runtime: "",
    storageUri: "",
    storageConnection: "",
    storagePath: "",
  });
  const [refused, setRefused] = useState<Refused | null>(null);
  const [error, setError] = useState("");
  const [loadedPlacement, setLoadedPlacement] = useState("");
  // Editing: nothing is written before the model is read (it would write the form's defaults).
  const [loaded, setLoaded] = useState(!name);
  const [visible, setVisible] = useState<string[]>([]);
  const choices = usePlacements(
    namespace,
    (first) => setFields((f) => ({ ...f, placement: f.placement || first })),
    (err) => setError(err.message),
  );

  // Editing: the model as it is.
  useEffect(() => {
    if (!name) return;
    intentPage(KIND, namespace, name)
      .then((page) => {
        const spec = page.spec as {
          placementRef?: { name?: string };
          targetNamespace?: string;
          template?: { predictor?: { model?: Record<string, unknown> } };
          storageConnections?: string[];
          overrides?: unknown[];
        };
        const model = spec.template?.predictor?.model ?? {};
        const format = model.modelFormat as { name?: string } | undefined;
        setLoadedPlacement(spec.placementRef?.name ?? "");
        setFields((f) => ({
          ...f,
          placement: spec.placementRef?.name ?? "",
          targetNamespace: spec.targetNamespace ?? namespace,
          modelFormat: format?.name ?? "",
          runtime: (model.runtime as string | undefined) ?? "",
          storageUri: (model.storageUri as string | undefined) ?? "",
          storageConnection: spec.storageConnections?.[0] ?? "",
          storagePath: (model.storage as { path?: string } | undefined)?.path ?? "",
          ...readOverrides(spec.overrides ?? []),
        }));
        setLoaded(true);
      })
      .catch((err: Error) => setError(err.message));
  }, [namespace, name]);

  // Editing a model whose Placement names its clusters: the list, to extend or shorten.
  useEffect(() => {
    const own = choices.find((p) => p.name === loadedPlacement && p.name === name && p.names !== null);
    if (own) setFields((f) => ({ ...f, mode: "clusters", clusters: own.names ?? [] }));
  }, [choices, loadedPlacement, name]);

  // The clusters the user may pick: those the namespace's Placements reach, and every
  // ManagedCluster when the user may list them (a platform admin; a tenant may not).
  useEffect(() => {
    listClusters()
      .then((rows) => setVisible(rows.map((r) => r.name)))
      .catch(() => setVisible([]));
  }, []);
  const candidates = useMemo(() => {
    const all = new Set<string>(visible);
    for (const p of choices) for (const c of [...p.clusters, ...(p.names ?? [])]) all.add(c);
    for (const c of fields.clusters) all.add(c);
    return [...all].sort();
  }, [visible, choices, fields.clusters]);

  const placed = choices.find((p) => p.name === fields.placement);
  const inScope = fields.mode === "clusters" ? fields.clusters : (placed?.clusters ?? []);
  const objects = useMemo(() => modelObjects(namespace, fields, inScope), [namespace, fields, inScope]);
  const named = new Set(TEXT.map(([, , , path]) => path));
  const elsewhere = (refused?.causes ?? []).filter(
    (c) =>
      c.field !== "spec.placementRef" &&
      !c.field.startsWith("spec.predicates") &&
      !c.field.startsWith("spec.overrides") &&
      ![...named].some((p) => c.field === p || c.field.startsWith(`${p}.`)),
  );

  const submit = async () => {
    if (fields.mode === "clusters" && fields.clusters.length === 0) {
      throw new Refused("Choose at least one cluster; Remove on the model's page takes it off every cluster.", [
        { field: "spec.predicates", message: "no cluster chosen", reason: "FieldValueRequired" },
      ]);
    }
    let done = { kind: KIND, namespace, name: fields.name };
    for (const o of objects) done = await apply(o);
    window.location.href = intentHref(done.kind, done.namespace, done.name);
  };

  return (
    <PageSection>
      <Title headingLevel="h1">{name ? `The model ${namespace}/${name}` : `Deploy a model in ${namespace}`}</Title>
      {error && (
        <Alert variant="danger" isInline title="The hub refused">
          {error}
        </Alert>
      )}
      {refused && (
        <Alert variant="danger" isInline title="Not written" data-testid="form-refused">
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
          submit().catch((err: Error) => setRefused(asRefused(err)));
        }}
      >
        {TEXT.map(([key, label, help, path]) => (
          <FormGroup key={key} label={label} fieldId={`model-${key}`}>
            <TextInput
              id={`model-${key}`}
              value={fields[key]}
              isDisabled={key === "name" && Boolean(name)}
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
        <FormGroup role="radiogroup" isInline fieldId="model-mode" label="Choose the clusters">
          <Radio
            id="model-mode-placement"
            name="model-mode"
            label="by a Placement of this namespace"
            isChecked={fields.mode === "placement"}
            onChange={() => setFields((f) => ({ ...f, mode: "placement" }))}
          />
          <Radio
            id="model-mode-clusters"
            name="model-mode"
            label="one by one"
            isChecked={fields.mode === "clusters"}
            onChange={() => setFields((f) => ({ ...f, mode: "clusters" }))}
          />
        </FormGroup>
        {fields.mode === "placement" ? (
          <PlacementPicker
            id="model-placement"
            choices={choices}
            value={fields.placement}
            onChange={(v) => setFields((f) => ({ ...f, placement: v }))}
          />
        ) : (
          <FormGroup label="Clusters" fieldId="model-clusters" role="group" data-testid="model-clusters">
            {candidates.map((c) => (
              <Checkbox
                key={c}
                id={`model-cluster-${c}`}
                label={c}
                isChecked={fields.clusters.includes(c)}
                onChange={(_e, on) =>
                  setFields((f) => ({
                    ...f,
                    clusters: on ? [...f.clusters, c].sort() : f.clusters.filter((x) => x !== c),
                  }))
                }
              />
            ))}
            <FormHelperText>
              <HelperText>
                <FieldErrors refused={refused} prefix="spec.predicates" id="clusters" />
                <HelperTextItem>
                  {candidates.length
                    ? `written as the Placement ${fields.name || "(the model's name)"}, which names them`
                    : "no cluster reaches this namespace yet: ask the hub admin to bind a cluster set to it"}
                </HelperTextItem>
              </HelperText>
            </FormHelperText>
          </FormGroup>
        )}
        {inScope.length > 0 && (
          <FormGroup label="Replicas per cluster" fieldId="model-replicas" role="group">
            {inScope.map((c) => (
              <TextInput
                key={c}
                id={`model-replicas-${c}`}
                aria-label={`Minimum replicas on ${c}`}
                placeholder={`${c}: as the template says`}
                type="number"
                value={fields.replicas[c] ?? ""}
                onChange={(_e, v) => setFields((f) => ({ ...f, replicas: { ...f.replicas, [c]: v } }))}
              />
            ))}
            <FormHelperText>
              <HelperText>
                <FieldErrors refused={refused} prefix="spec.overrides" id="overrides" />
                <HelperTextItem>a number writes an override for that cluster alone</HelperTextItem>
              </HelperText>
            </FormHelperText>
          </FormGroup>
        )}
        <ActionGroup>
          <Button type="submit" variant="primary" isDisabled={!loaded}>
            {name ? "Save" : "Deploy"}
          </Button>
          <YamlToggle object={objects} />
        </ActionGroup>
      </Form>
    </PageSection>
  );
}
