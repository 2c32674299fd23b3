// The REST client: every call carries the signed-in user's token, so the console shows
// exactly what that user may see and do. Types come from the OpenAPI document Kairship
// serves (api.d.ts is generated from ui/openapi.json by openapi-typescript).

import type { components } from './api';

type S = components['schemas'];
export type Instance = S['kairship.v1alpha1.Instance'];
export type Condition = S['kairship.v1alpha1.Condition'];
export type Cluster = S['kairship.v1alpha1.Cluster'];
export type Workload = S['kairship.v1alpha1.Workload'];
export type Policy = S['kairship.v1alpha1.Policy'];
export type Actor = S['kairship.v1alpha1.ActorSnapshot'];
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
  clusters: (inst: string) =>
    call<S['kairship.v1alpha1.ListClustersResponse']>('GET', `/instances/${seg(inst)}/clusters`).then(
      (r) => r.clusters ?? [],
    ),
  cordon: (inst: string, name: string, on: boolean) =>
    call<Cluster>('POST', `/instances/${seg(inst)}/clusters/${seg(name)}:${on ? 'cordon' : 'uncordon'}`, {}),
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
  actors: () => call<S['kairship.v1alpha1.ListActorsResponse']>('GET', '/actors').then((r) => r.actors ?? []),
  restart: (inst: string) =>
    call<S['kairship.v1alpha1.RestartInstanceResponse']>('POST', `/instances/${seg(inst)}:restart`, {}),
};

/** Whether the caller holds a role on every instance: ListActors then includes the
 *  root actor (it has no instance). The console offers admin actions only then; the API
 *  still decides, and a refusal is shown as the API words it. */
export async function seesEverything(): Promise<boolean> {
  const actors = await api.actors();
  return actors.some((a) => !a.instance);
}
