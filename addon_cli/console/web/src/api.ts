// What the console's server answers (addon_cli/console/server.py): the command line's rows.

export interface Row {
  kind: string;
  namespace: string;
  name: string;
  cluster: string;
  phase: string;
  ready: boolean;
  revision: string;
  url: string;
  detail: string;
  reason: string;
  external_url: string;
}

export interface Fleet {
  rows: Row[];
  /** Kinds the user may not list where they asked, with the hub's words. */
  refused: Record<string, string>;
}

export interface User {
  username: string;
  groups: string[];
}

/** The hub's words when a request failed (the server passes them on as they are). */
export async function failure(response: Response): Promise<string> {
  try {
    const body = await response.json();
    return String(body.message ?? `HTTP ${response.status}`);
  } catch {
    return `HTTP ${response.status} ${response.statusText}`;
  }
}

export async function whoami(): Promise<User> {
  const response = await fetch("/api/whoami");
  if (!response.ok) throw new Error(await failure(response));
  return (await response.json()) as User;
}

function query(namespace: string): string {
  return namespace ? `?namespace=${encodeURIComponent(namespace)}` : "";
}

/**
 * The fleet, now and after every change: calls `onFleet` with each update and `onError` with
 * the hub's words when it refuses. Returns the function that stops listening.
 */
export function watchFleet(
  namespace: string,
  onFleet: (fleet: Fleet) => void,
  onError: (message: string) => void,
): () => void {
  const source = new EventSource(`/api/fleet/events${query(namespace)}`);
  source.addEventListener("fleet", (event) => {
    onFleet(JSON.parse((event as MessageEvent<string>).data) as Fleet);
  });
  source.onerror = () => {
    // An EventSource hides the answer's body: ask once more to show the hub's words.
    void fetch(`/api/fleet${query(namespace)}`).then(async (response) => {
      if (!response.ok) {
        source.close();
        onError(await failure(response));
      }
    });
  };
  return () => source.close();
}

export interface Link {
  name: string;
  /** true: holds; false: the chain breaks here; null: not decided (waiting). */
  ok: boolean | null;
  summary: string;
  evidence: string[];
}

export interface HubEvent {
  type: string;
  reason: string;
  message: string;
  count: number;
  last: string;
}

export interface IntentPage {
  kind: string;
  namespace: string;
  name: string;
  spec: Record<string, unknown>;
  phase: string;
  ready: { status: string; reason: string; message: string };
  rows: Row[];
  chains: Record<string, Link[]>;
  rollout: string;
  events: HubEvent[];
  eventsRefused: string;
}

export function intentHref(kind: string, namespace: string, name: string): string {
  const q = new URLSearchParams({ kind, namespace, name });
  return `/intent?${q.toString()}`;
}

export async function intentPage(kind: string, namespace: string, name: string): Promise<IntentPage> {
  const q = new URLSearchParams({ kind, namespace, name });
  const response = await fetch(`/api/intent?${q.toString()}`);
  if (!response.ok) throw new Error(await failure(response));
  return (await response.json()) as IntentPage;
}

export interface Cause {
  field: string;
  message: string;
  reason: string;
}

/** A write the hub refused: its words, and the fields it named. */
export class Refused extends Error {
  causes: Cause[];
  constructor(message: string, causes: Cause[]) {
    super(message);
    this.causes = causes;
  }
}

const WRITE_HEADERS = { "Content-Type": "application/json", "X-Console-Request": "1" };

/** Create or change an object as the user (server-side apply); throws Refused. */
export async function apply(object: object): Promise<{ kind: string; namespace: string; name: string }> {
  const response = await fetch("/api/apply", {
    method: "POST",
    headers: WRITE_HEADERS,
    body: JSON.stringify({ object }),
  });
  const body = await response.json();
  if (!response.ok) throw new Refused(String(body.message), (body.causes ?? []) as Cause[]);
  return body;
}

export async function remove(kind: string, namespace: string, name: string): Promise<void> {
  const q = new URLSearchParams({ kind, namespace, name });
  const response = await fetch(`/api/object?${q.toString()}`, {
    method: "DELETE",
    headers: WRITE_HEADERS,
  });
  if (!response.ok) {
    const body = await response.json();
    throw new Refused(String(body.message), (body.causes ?? []) as Cause[]);
  }
}

export interface Placement {
  name: string;
  /** The clusters it has decided. */
  clusters: string[];
  /** The clusters it names one by one (the model form's explicit list), or null. */
  names: string[] | null;
}

export async function placements(namespace: string): Promise<Placement[]> {
  const response = await fetch(`/api/placements?namespace=${encodeURIComponent(namespace)}`);
  if (!response.ok) throw new Error(await failure(response));
  return (await response.json()) as Placement[];
}

/** A rollout action (pause, resume, undo, approve) as the user; the manager's answer. */
export async function rolloutAction(
  kind: string,
  namespace: string,
  name: string,
  action: string,
): Promise<string> {
  const response = await fetch("/api/rollout", {
    method: "POST",
    headers: WRITE_HEADERS,
    body: JSON.stringify({ kind, namespace, name, action }),
  });
  const body = await response.json();
  if (!response.ok) throw new Refused(String(body.message), (body.causes ?? []) as Cause[]);
  return String(body.message);
}

/** Write storage credentials as the user; only the key names come back. */
export async function putSecret(
  namespace: string,
  name: string,
  values: Record<string, string>,
): Promise<string[]> {
  const response = await fetch("/api/secret", {
    method: "POST",
    headers: WRITE_HEADERS,
    body: JSON.stringify({ namespace, name, values }),
  });
  const body = await response.json();
  if (!response.ok) throw new Refused(String(body.message), (body.causes ?? []) as Cause[]);
  return body.keys as string[];
}

export interface ClusterRow {
  name: string;
  available: string;
  addon: string;
  platform: string;
  version: string;
  intents: number;
  stale: boolean;
}

export async function clusters(): Promise<ClusterRow[]> {
  const response = await fetch("/api/clusters");
  if (!response.ok) throw new Error(await failure(response));
  return ((await response.json()) as { clusters: ClusterRow[] }).clusters;
}

export interface ClusterPage {
  cluster: ClusterRow;
  labels: Record<string, string>;
  rows: Row[];
}

export async function clusterPage(name: string): Promise<ClusterPage> {
  const response = await fetch(`/api/cluster?name=${encodeURIComponent(name)}`);
  if (!response.ok) throw new Error(await failure(response));
  return (await response.json()) as ClusterPage;
}
