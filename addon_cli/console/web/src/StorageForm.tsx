// Storage credentials (a StorageConnection and its Secret): the secret values are written once,
// as the user, and never shown again; the connection says where they go on each cluster
// (issue 33, item 2).
import { useState } from "react";
import {
  ActionGroup,
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
import { Refused, apply, intentHref, putSecret } from "./api";
import { FieldErrors, PlacementPicker, RefusedAlert, asRefused, usePlacements } from "./FormParts";

const ACCESS_KEY = "AWS_ACCESS_KEY_ID";
const SECRET_KEY = "AWS_SECRET_ACCESS_KEY";

export function StorageForm({ namespace }: { namespace: string }) {
  const [name, setName] = useState("");
  const [placement, setPlacement] = useState("");
  const [targets, setTargets] = useState(namespace);
  const [endpoint, setEndpoint] = useState("");
  const [region, setRegion] = useState("us-east-1");
  const [bucket, setBucket] = useState("");
  const [accessKey, setAccessKey] = useState("");
  const [secretKey, setSecretKey] = useState("");
  const [refused, setRefused] = useState<Refused | null>(null);
  const choices = usePlacements(
    namespace,
    (first) => setPlacement((p) => p || first),
    (err) => setRefused(asRefused(err)),
  );
  const causes = (prefix: string) => <FieldErrors refused={refused} prefix={prefix} />;

  const submit = async () => {
    const secretName = `${name}-credentials`;
    // The connection first: a refused one writes no credentials at all.
    const connection = {
      apiVersion: "modelserving.opendatahub.io/v1alpha1",
      kind: "StorageConnection",
      metadata: { name, namespace },
      spec: {
        type: "s3",
        placementRef: { name: placement },
        secretRef: {
          name: secretName,
          keys: { access_key_id: ACCESS_KEY, secret_access_key: SECRET_KEY },
        },
        s3: { endpoint, region, bucket },
        targetNamespaces: targets.split(",").map((t) => t.trim()).filter(Boolean),
      },
    };
    const done = await apply(connection);
    await putSecret(namespace, secretName, { [ACCESS_KEY]: accessKey, [SECRET_KEY]: secretKey });
    window.location.href = intentHref(done.kind, done.namespace, done.name);
  };

  return (
    <PageSection>
      <Title headingLevel="h1">Storage credentials in {namespace}</Title>
      <RefusedAlert refused={refused} />
      <Form
        onSubmit={(event) => {
          event.preventDefault();
          setRefused(null);
          submit().catch((err: Error) =>
            setRefused(asRefused(err)),
          );
        }}
      >
        <FormGroup label="Name" fieldId="storage-name">
          <TextInput id="storage-name" value={name} onChange={(_e, v) => setName(v)} />
          <FormHelperText>
            <HelperText>{causes("metadata.name")}</HelperText>
          </FormHelperText>
        </FormGroup>
        <PlacementPicker id="storage-placement" choices={choices} value={placement} onChange={setPlacement} />
        <FormGroup label="Spoke namespaces" fieldId="storage-targets">
          <TextInput id="storage-targets" value={targets} onChange={(_e, v) => setTargets(v)} />
          <FormHelperText>
            <HelperText>
              {causes("spec.targetNamespaces")}
              <HelperTextItem>comma-separated: where the models that read it run</HelperTextItem>
            </HelperText>
          </FormHelperText>
        </FormGroup>
        <FormGroup label="S3 endpoint" fieldId="storage-endpoint">
          <TextInput id="storage-endpoint" value={endpoint} onChange={(_e, v) => setEndpoint(v)} />
          <FormHelperText>
            <HelperText>{causes("spec.s3.endpoint")}</HelperText>
          </FormHelperText>
        </FormGroup>
        <FormGroup label="Region" fieldId="storage-region">
          <TextInput id="storage-region" value={region} onChange={(_e, v) => setRegion(v)} />
        </FormGroup>
        <FormGroup label="Bucket" fieldId="storage-bucket">
          <TextInput id="storage-bucket" value={bucket} onChange={(_e, v) => setBucket(v)} />
          <FormHelperText>
            <HelperText>{causes("spec.s3.bucket")}</HelperText>
          </FormHelperText>
        </FormGroup>
        <FormGroup label="Access key id" fieldId="storage-access">
          <TextInput id="storage-access" type="password" autoComplete="off" value={accessKey} onChange={(_e, v) => setAccessKey(v)} />
        </FormGroup>
        <FormGroup label="Secret access key" fieldId="storage-secret">
          <TextInput id="storage-secret" type="password" autoComplete="off" value={secretKey} onChange={(_e, v) => setSecretKey(v)} />
          <FormHelperText>
            <HelperText>
              <HelperTextItem>written once to Secret NAME-credentials; never shown again</HelperTextItem>
            </HelperText>
          </FormHelperText>
        </FormGroup>
        <ActionGroup>
          <Button type="submit" variant="primary">
            Save the credentials
          </Button>
        </ActionGroup>
      </Form>
    </PageSection>
  );
}
