// The REST client: every call carries the signed-in user's token, so the console shows
// exactly what that user may see and do. Types come from the OpenAPI document Kairship
// serves (api.d.ts is generated from ui/openapi.json by openapi-typescript).

import type { components } from './api';

export type S = components['schemas'];
export type Instance = S['kairship.v1alpha1.Instance'];
export type Condition = S['kairship.v1alpha1.Condition'];
export type Cluster = S['kairship.v1alpha1.Cluster'];
export type Workload = S['kairship.v1alpha1.Workload'];
export type Trace = S['kairship.v1alpha1.Trace'];
export type Policy = S['kairship.v1alpha1.Policy'];
export type Actor = S['kairship.v1alpha1.ActorSnapshot'];
export type Caller = S['kairship.v1alpha1.Caller'];
export type SearchHit = S['kairship.v1alpha1.SearchHit'];
export type Component = S['kairship.v1alpha1.Component'];
export type Backup = S['kairship.v1alpha1.Backup'];
type Violation = { field?: string; description?: string };

const PREFIX = '/apis/kairship.io/v1alpha1';
const TOKEN_KEY = 'kairship.token';

export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly violations: Violation[],
  ) {
    super(message);
  }
}

export function token(): string {
  return sessionStorage.getItem(TOKEN_KEY) ?? '';
}

export function setToken(t: string) {
  if (t) sessionStorage.setItem(TOKEN_KEY, t);
  else sessionStorage.removeItem(TOKEN_KEY);
}

async function call<T>(method: string, path: string, body?: unknown): Promise<T> {
  const headers: Record<string, string> = { authorization: `Bearer ${token()}` };
  if (body !== undefined) headers['content-type'] = 'application/json';
  const res = await fetch(PREFIX + path, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  let json: unknown = {};
  try {
    json = text ? JSON.parse(text) : {};
  } catch {
    json = { message: text };
  }
  if (!res.ok) {
    const st = json as S['google.rpc.Status'];
    const violations = (st.details ?? []).flatMap((d) => d.fieldViolations ?? []);
    throw new ApiError(res.status, st.message ?? `HTTP ${res.status}`, violations);
  }
  return json as T;
}

const seg = encodeURIComponent;

export const api = {
  instances: () =>
    call<S['kairship.v1alpha1.ListInstancesResponse']>('GET', '/instances').then((r) => r.instances ?? []),
  instance: (name: string) => call<Instance>('GET', `/instances/${seg(name)}`),
  createInstance: (instance: Instance) => call<Instance>('POST', '/instances', instance),
  deleteInstance: (name: string) => call<unknown>('DELETE', `/instances/${seg(name)}`),
  hibernate: (name: string, sleep: boolean) =>
    call<Instance>('POST', `/instances/${seg(name)}:${sleep ? 'hibernate' : 'wake'}`, {}),
  clusters: (inst: string) =>
    call<S['kairship.v1alpha1.ListClustersResponse']>('GET', `/instances/${seg(inst)}/clusters`).then(
      (r) => r.clusters ?? [],
    ),
  cordon: (inst: string, name: string, on: boolean) =>
    call<Cluster>('POST', `/instances/${seg(inst)}/clusters/${seg(name)}:${on ? 'cordon' : 'uncordon'}`, {}),
  joinCluster: (inst: string, req: { name: string; kubeconfig: string; context?: string }) =>
    call<Cluster>('POST', `/instances/${seg(inst)}/clusters`, req),
  promote: (inst: string, cluster: string, req: { namespace: string; kind: string; name: string; dependencies: string[] }) =>
    call<S['kairship.v1alpha1.PromoteWorkloadResponse']>('POST', `/instances/${seg(inst)}/clusters/${seg(cluster)}/promotions`, req),
  components: (inst: string) =>
    call<S['kairship.v1alpha1.ListComponentsResponse']>('GET', `/instances/${seg(inst)}/components`).then((r) => r.components ?? []),
  // An update naming only this component's replicas: the rest of the spec is kept.
  scaleComponent: (inst: string, setting: string, replicas: number) =>
    call<Instance>('PUT', `/instances/${seg(inst)}`, {
      metadata: { name: inst },
      spec: { mode: 'INSTANCE_MODE_MANAGED', componentReplicas: { [setting]: replicas } },
    }),
  controllers: (inst: string) => call<S['kairship.v1alpha1.ListControllersResponse']>('GET', `/instances/${seg(inst)}/controllers`),
  backups: (inst: string) =>
    call<S['kairship.v1alpha1.ListBackupsResponse']>('GET', `/instances/${seg(inst)}/backups`).then((r) => r.backups ?? []),
  createBackup: (inst: string) => call<Backup>('POST', `/instances/${seg(inst)}/backups`, {}),
  deleteBackup: (inst: string, backup: string) => call<unknown>('DELETE', `/instances/${seg(inst)}/backups/${seg(backup)}`),
  restoreBackup: (inst: string, backup: string, from: string) =>
    call<S['kairship.v1alpha1.RestoreResult']>('POST', `/instances/${seg(inst)}/restores`, { backup, sourceInstance: from }),
  // The instance as read, with only its schedule changed (0 minutes: none).
  setBackupSchedule: async (inst: string, intervalMinutes: number, keep: number) => {
    const i = await call<Instance>('GET', `/instances/${seg(inst)}`);
    return call<Instance>('PUT', `/instances/${seg(inst)}`, {
      metadata: { name: inst, labels: i.metadata?.labels },
      spec: { ...i.spec, backupSchedule: { intervalMinutes, keep } },
    });
  },
  // With the signed-in user's own token in it, for kubectl, karmadactl and helm.
  kubeconfig: (inst: string) =>
    call<S['kairship.v1alpha1.Kubeconfig']>('GET', `/instances/${seg(inst)}/kubeconfig?includeToken=true`),
  renewCertificates: (inst: string) =>
    call<S['kairship.v1alpha1.RenewCertificatesResponse']>('POST', `/instances/${seg(inst)}/certificates:renew`, {}),
  restartComponent: (inst: string, component: string) =>
    call<Component>('POST', `/instances/${seg(inst)}/components/${seg(component)}:restart`, {}),
  rollouts: () =>
    call<S['kairship.v1alpha1.ListRolloutsResponse']>('GET', '/rollouts').then((r) => r.rollouts ?? []),
  steerRollout: (name: string, action: 'pause' | 'resume' | 'abort') =>
    call<S['kairship.v1alpha1.Rollout']>('POST', `/rollouts/${seg(name)}:${action}`, {}),
  registrationToken: (inst: string) =>
    call<S['kairship.v1alpha1.RegistrationToken']>('POST', `/instances/${seg(inst)}/registrationtokens`, {}),
  removeCluster: (inst: string, name: string, force: boolean) =>
    call<S['kairship.v1alpha1.RemoveClusterResponse']>('POST', `/instances/${seg(inst)}/clusters/${seg(name)}:remove`, { force }),
  workloads: (inst: string) =>
    call<S['kairship.v1alpha1.ListWorkloadsResponse']>('GET', `/instances/${seg(inst)}/workloads`).then(
      (r) => r.workloads ?? [],
    ),
  policies: (inst: string) =>
    call<S['kairship.v1alpha1.ListPoliciesResponse']>('GET', `/instances/${seg(inst)}/policies`).then(
      (r) => r.policies ?? [],
    ),
  savePolicy: (inst: string, objectJson: string, create: boolean) =>
    call<Policy>(create ? 'POST' : 'PUT', `/instances/${seg(inst)}/policies`, { objectJson }),
  workload: (inst: string, ns: string, kind: string, name: string) =>
    call<Workload>('GET', `/instances/${seg(inst)}/namespaces/${seg(ns)}/workloads/${seg(kind)}/${seg(name)}`),
  trace: (inst: string, q: { group?: string; version?: string; kind: string; namespace: string; name: string }) =>
    call<Trace>('GET', `/instances/${seg(inst)}/trace?${new URLSearchParams(Object.entries(q).filter(([, v]) => v) as [string, string][])}`),
  caller: () => call<Caller>('GET', '/caller'),
  search: (params: Record<string, string>) =>
    call<S['kairship.v1alpha1.SearchResponse']>('GET', `/search?${new URLSearchParams(params)}`),
  actors: () => call<S['kairship.v1alpha1.ListActorsResponse']>('GET', '/actors').then((r) => r.actors ?? []),
  restart: (inst: string) =>
    call<S['kairship.v1alpha1.RestartInstanceResponse']>('POST', `/instances/${seg(inst)}:restart`, {}),
};

/** A Kubernetes Event as the instance's API serves it (read through Kairship's proxy). */
export type KubeEvent = {
  metadata?: { name?: string; namespace?: string; creationTimestamp?: string };
  involvedObject?: { kind?: string; name?: string; namespace?: string };
  reason?: string;
  message?: string;
  type?: string;
  count?: number;
  firstTimestamp?: string;
  lastTimestamp?: string;
  eventTime?: string;
};

/** A list read through the kubectl-compatible proxy with the caller's token: the
 *  instance's RBAC decides, as for kubectl (and a member's, through its cluster proxy). */
async function proxyList<T>(inst: string, path: string): Promise<T[]> {
  const res = await fetch(`${PREFIX}/instances/${seg(inst)}/proxy${path}`, {
    headers: { authorization: `Bearer ${token()}`, accept: 'application/json' },
  });
  const body = (await res.json().catch(() => ({}))) as { items?: T[]; message?: string };
  if (!res.ok) throw new ApiError(res.status, body.message ?? `HTTP ${res.status}`, []);
  return body.items ?? [];
}

/** A Kubernetes Table (`kubectl get`'s shape) of one kind, read through the proxy as the
 *  caller: the columns the instance prints, and each row's object metadata. Secrets list
 *  so without a single value (the Table holds names, types and key counts). */
export type KubeTable = {
  columnDefinitions?: { name: string; priority?: number }[];
  rows?: { cells: unknown[]; object?: { metadata?: { name?: string; namespace?: string } } }[];
};

export async function proxyTable(inst: string, path: string): Promise<KubeTable> {
  const res = await fetch(`${PREFIX}/instances/${seg(inst)}/proxy${path}`, {
    headers: { authorization: `Bearer ${token()}`, accept: 'application/json;as=Table;v=v1;g=meta.k8s.io' },
  });
  const body = (await res.json().catch(() => ({}))) as KubeTable & { message?: string };
  if (!res.ok) throw new ApiError(res.status, body.message ?? `HTTP ${res.status}`, []);
  return body;
}

/** One object through the proxy, as the caller. */
export async function proxyGet(inst: string, path: string): Promise<Record<string, unknown>> {
  const res = await fetch(`${PREFIX}/instances/${seg(inst)}/proxy${path}`, {
    headers: { authorization: `Bearer ${token()}`, accept: 'application/json' },
  });
  const body = (await res.json().catch(() => ({}))) as Record<string, unknown> & { message?: string };
  if (!res.ok) throw new ApiError(res.status, (body.message as string) ?? `HTTP ${res.status}`, []);
  return body;
}

/** The instance's most recent events, newest first. */
export async function recentEvents(inst: string, max: number): Promise<KubeEvent[]> {
  const items = await proxyList<KubeEvent>(inst, '/api/v1/events?limit=500');
  const when = (e: KubeEvent) => e.lastTimestamp ?? e.eventTime ?? e.metadata?.creationTimestamp ?? '';
  return items.sort((a, b) => when(b).localeCompare(when(a))).slice(0, max);
}

/** A Pod as a member cluster's API serves it. */
export type KubePod = {
  metadata?: { name?: string; deletionTimestamp?: string };
  spec?: { nodeName?: string; containers?: unknown[] };
  status?: {
    phase?: string;
    reason?: string;
    podIP?: string;
    containerStatuses?: { ready?: boolean; restartCount?: number; state?: { waiting?: { reason?: string }; terminated?: { reason?: string } } }[];
  };
};

/** The Pods matching `selector` in `ns` on member `cluster`, read through Karmada's
 *  cluster proxy, which acts on the member as the caller. */
export const memberPods = (inst: string, cluster: string, ns: string, selector: string) =>
  proxyList<KubePod>(
    inst,
    `/apis/cluster.karmada.io/v1alpha1/clusters/${seg(cluster)}/proxy/api/v1/namespaces/${seg(ns)}/pods?labelSelector=${encodeURIComponent(selector)}`,
  );

/** A log through Kairship (GetPodLogs or GetComponentLogs over REST: one JSON object a
 *  line), handed to `onText` as it comes; with `follow` until `signal` aborts or the
 *  container ends. */
async function streamLog(path: string, signal: AbortSignal, onText: (text: string) => void): Promise<void> {
  const res = await fetch(PREFIX + path, { headers: { authorization: `Bearer ${token()}` }, signal });
  if (!res.ok || !res.body) {
    const st = (await res.json().catch(() => ({}))) as S['google.rpc.Status'];
    throw new ApiError(res.status, st.message ?? `HTTP ${res.status}`, []);
  }
  const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
  let rest = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    rest += value;
    const lines = rest.split('\n');
    rest = lines.pop() ?? '';
    for (const line of lines.filter((l) => l.trim())) {
      const m = JSON.parse(line) as { result?: { text?: string }; error?: { message?: string } };
      if (m.error) throw new ApiError(500, m.error.message ?? 'the log stream failed', []);
      onText(m.result?.text ?? '');
    }
  }
}

export type LogOptions = { tailLines: number; follow: boolean; signal: AbortSignal };
export type LogSource = (opts: LogOptions, onText: (text: string) => void) => Promise<void>;

const logQuery = (o: LogOptions) => new URLSearchParams({ tailLines: String(o.tailLines), follow: String(o.follow) });

/** A pod's log on a member cluster (WorkloadService.GetPodLogs). */
export const podLog =
  (inst: string, cluster: string, ns: string, pod: string): LogSource =>
  (o, onText) =>
    streamLog(`/instances/${seg(inst)}/clusters/${seg(cluster)}/namespaces/${seg(ns)}/pods/${seg(pod)}/log?${logQuery(o)}`, o.signal, onText);

/** A managed instance's component's log (InstanceService.GetComponentLogs). */
export const componentLog =
  (inst: string, component: string): LogSource =>
  (o, onText) =>
    streamLog(`/instances/${seg(inst)}/components/${seg(component)}/log?${logQuery(o)}`, o.signal, onText);

/** What the caller may do: the strongest role on `inst` (fleet-wide roles included). */
export type Roles = { name: string; fleet: string; on: (inst: string) => string };

const RANK: Record<string, number> = { view: 1, edit: 2, admin: 3 };

export function atLeast(role: string, need: 'view' | 'edit' | 'admin'): boolean {
  return (RANK[role] ?? 0) >= RANK[need];
}

export async function callerRoles(): Promise<Roles> {
  const c = await api.caller();
  const named = new Map((c.roles ?? []).map((r) => [r.instance ?? '', r.role ?? '']));
  const fleet = c.fleetRole ?? '';
  return { name: c.name ?? '', fleet, on: (inst) => named.get(inst) ?? fleet };
}

/** The chaos report as `kairship chaos run` writes it (report.json). */
export type ChaosReport = {
  profile?: string;
  passed?: boolean;
  experiments?: {
    name?: string;
    description?: string;
    victim?: string;
    passed?: boolean;
    skipped?: string | null;
    goals?: { name?: string; target?: string; actual?: string; ok?: boolean; enforced?: boolean }[];
  }[];
};

async function chaosFile(file: string): Promise<Response> {
  const res = await fetch(`${PREFIX}/chaos/${file}`, { headers: { authorization: `Bearer ${token()}` } });
  if (!res.ok) {
    const body = (await res.json().catch(() => ({}))) as { message?: string };
    throw new ApiError(res.status, body.message ?? `HTTP ${res.status}`, []);
  }
  return res;
}

export const chaosReport = async (): Promise<ChaosReport> => (await chaosFile('report.json')).json();
export const chaosPicture = async (): Promise<string> => (await chaosFile('report.svg')).text();
