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
