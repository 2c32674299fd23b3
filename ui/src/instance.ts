// One instance: its member clusters, workloads with placement, overrides and the Pods on
// each member (read through Karmada's cluster proxy as the signed-in user), policies
// (view as YAML or JSON, create and edit with the server's validation errors beside the
// editor) and recent events.

import { parse, stringify } from 'yaml';
import { api, ApiError, memberPods, podLog, recentEvents, type Cluster, type Instance, type KubeEvent, type KubePod, type Policy, type Workload } from './client';
import { showComponents } from './components';
import { showBackups } from './backups';
import { showControllers } from './controllers';
import { age, confirmDialog, h, mount } from './dom';
import { openLog } from './logs';
import { promoteForm } from './promote';
import { bar, explanation, phaseBadge } from './overview';

/** How many of the newest events the page lists. */
const EVENTS_SHOWN = 25;

const NEW_POLICY = {
  apiVersion: 'policy.karmada.io/v1alpha1',
  kind: 'PropagationPolicy',
  metadata: { name: 'my-policy', namespace: 'default' },
  spec: {
    resourceSelectors: [{ apiVersion: 'apps/v1', kind: 'Deployment', name: 'my-app' }],
    placement: { clusterAffinity: { clusterNames: ['member1'] } },
  },
};

/** A removal asked from the console: under way, or refused (with whether force may help). */
type Removal = { message: string; refused: boolean };

function clusterRows(inst: string, clusters: Cluster[], shared: Map<string, string[]>, canAdmin: boolean, removals: Map<string, Removal>, refresh: () => void, report: (e: unknown) => void) {
  return clusters.map((c) => {
    const name = c.metadata?.name ?? '';
    const others = shared.get(name);
    const remove = async (force: boolean) => {
      removals.set(name, { message: force ? `removing ${name}: Karmada moves its workloads first…` : `removing ${name}…`, refused: false });
      refresh();
      try {
        const r = await api.removeCluster(inst, name, force);
        removals.delete(name);
        // A Pull member removed without its kubeconfig keeps its agent: say what is left.
        if (r.memberLeft?.length) report(new Error(`${name} was a Pull mode member: its karmada-agent may no longer reach the instance; still on the member: ${r.memberLeft.join(', ')}`));
      } catch (e) {
        // Refused while workloads run there: the server names them; force may move them.
        const refused = e instanceof ApiError && e.status === 400 && e.message.includes('propagated workload');
        removals.set(name, { message: (e as Error).message, refused });
      }
      refresh();
    };
    const removal = removals.get(name);
    const toggle = async () => {
      try {
        await api.cordon(inst, name, !c.unschedulable);
        refresh();
      } catch (e) {
        report(e);
      }
    };
    return h(
      'tr',
      { 'data-cluster': name },
      h('td', {}, name, h('div', { class: 'muted' }, [c.provider, c.region, c.zone].filter(Boolean).join(' · '))),
      h(
        'td',
        {},
        phaseBadge(c.ready ? 'Ready' : 'NotReady'),
        c.unschedulable && h('span', { class: 'tag' }, 'cordoned'),
        // The same member joined to other instances too: what one does there, the others feel.
        others && h('span', { class: 'tag shared', 'data-shared-with': others.join(','), title: 'one member cluster (the same Karmada cluster ID) in several instances' }, `shared with ${others.join(', ')}`),
        h('div', { class: 'why' }, explanation(c.conditions)),
      ),
      h('td', {}, c.kubernetesVersion ?? '', h('div', { class: 'muted' }, c.syncMode ?? '')),
      h('td', {}, `${c.nodesReady ?? 0}/${c.nodesTotal ?? 0}`),
      h('td', { class: 'bars' }, bar('CPU', c.allocated?.cpu, c.allocatable?.cpu), bar('Memory', c.allocated?.memory, c.allocatable?.memory), bar('Pods', c.allocated?.pods, c.allocatable?.pods)),
      h('td', {}, (c.taints ?? []).map((t) => h('div', { class: 'tag' }, `${t.key}${t.value ? `=${t.value}` : ''}:${t.effect}`))),
      h(
        'td',
        {},
        canAdmin && h('button', { class: 'small', onclick: toggle }, c.unschedulable ? 'Uncordon' : 'Cordon'),
        canAdmin && h('button', { class: 'small', onclick: () => void remove(false) }, 'Remove'),
        removal && h('div', { class: removal.refused ? 'error removal' : 'muted removal', role: 'status' }, removal.message),
        removal?.refused && h('button', { class: 'small', onclick: () => void remove(true) }, 'Remove anyway'),
      ),
    );
  });
}

/** Joining a member (Push mode): its name and kubeconfig, sent once, never stored. */
function joinForm(inst: string, done: () => void) {
  const name = h('input', { id: 'join-name', placeholder: 'member4', 'aria-label': 'cluster name' }) as HTMLInputElement;
  const kubeconfig = h('textarea', { id: 'join-kubeconfig', class: 'code', rows: 10, spellcheck: 'false', 'aria-label': 'member kubeconfig', placeholder: "the member's kubeconfig (inline token or certificate data)" }) as HTMLTextAreaElement;
  const errors = h('div', { class: 'violations', role: 'alert', id: 'join-error' });
  const join = async () => {
    mount(errors, h('div', { class: 'muted' }, 'joining…'));
    try {
      await api.joinCluster(inst, { name: name.value.trim(), kubeconfig: kubeconfig.value });
      done();
    } catch (e) {
      mount(errors, h('div', { class: 'violation' }, (e as Error).message));
    }
  };
  return h('div', { class: 'editor', id: 'join-form' }, h('div', { class: 'actions' }, name, h('button', { class: 'primary small', onclick: join }, 'Join'), h('button', { class: 'small', onclick: done }, 'Close')), h('div', { class: 'editor-body' }, kubeconfig, errors));
}

type Overrides = NonNullable<NonNullable<Workload['placement']>['overrides']>;

/** Overrides are read live from the instance's Works (GetWorkload), so the list shows
 *  them on request; `shown` keeps what was fetched across refreshes. */
function overridesCell(inst: string, w: Workload, shown: Map<string, Overrides | string>, refresh: () => void) {
  const id = `${w.metadata?.namespace}/${w.kind}/${w.metadata?.name}`;
  const got = shown.get(id);
  if (!w.placement?.bindingName) return h('span', { class: 'muted' }, '—');
  if (got === undefined) {
    const load = async () => {
      try {
        const full = await api.workload(inst, w.metadata?.namespace ?? '', w.kind ?? '', w.metadata?.name ?? '');
        shown.set(id, full.placement?.overrides ?? []);
      } catch (e) {
        shown.set(id, (e as Error).message);
      }
      refresh();
    };
    return h('button', { class: 'small', onclick: load }, 'Show');
  }
  if (typeof got === 'string') return h('span', { class: 'error' }, got);
  const changed = got.filter((o) => (o.changes ?? []).length > 0);
  if (changed.length === 0) return h('span', { class: 'muted', 'data-overrides': 'none' }, 'none');
  return changed.map((o) =>
    h('div', { class: 'override', 'data-cluster': o.cluster ?? '' }, h('strong', {}, `${o.cluster}: `), (o.changes ?? []).join('; '), (o.policies ?? []).length > 0 && h('span', { class: 'muted' }, ` (${(o.policies ?? []).join(', ')})`)),
  );
}

function eventRows(events: KubeEvent[]) {
  const now = Date.now();
  return events.map((e) => {
    const at = Date.parse(e.lastTimestamp ?? e.eventTime ?? e.metadata?.creationTimestamp ?? '');
    const o = e.involvedObject ?? {};
    return h(
      'tr',
      { 'data-reason': e.reason ?? '' },
      h('td', {}, Number.isNaN(at) ? '' : age(Math.max(0, Math.round((now - at) / 1000)))),
      h('td', { class: e.type === 'Warning' ? 'error' : '' }, e.type ?? ''),
      h('td', {}, e.reason ?? ''),
      h('td', {}, `${o.kind ?? ''} ${o.namespace ? `${o.namespace}/` : ''}${o.name ?? ''}`),
      h('td', {}, e.message ?? '', (e.count ?? 1) > 1 && h('span', { class: 'muted' }, ` (x${e.count})`)),
    );
  });
}

/** The label selector of a workload's Pods on the members, as kubectl's `-l` takes it: a
 *  Job's own selector names its uid on the control plane, so its Pods go by job name. */
function podSelector(w: Workload): string | undefined {
  let obj: { spec?: { selector?: { matchLabels?: Record<string, string>; matchExpressions?: { key: string; operator: string; values?: string[] }[] } } } = {};
  try {
    obj = JSON.parse(w.objectJson ?? '{}');
  } catch {
    return undefined;
  }
  if (w.kind === 'Job') return `batch.kubernetes.io/job-name=${w.metadata?.name ?? ''}`;
  const sel = obj.spec?.selector;
  const parts = Object.entries(sel?.matchLabels ?? {}).map(([k, v]) => `${k}=${v}`);
  for (const e of sel?.matchExpressions ?? []) {
    const vs = (e.values ?? []).join(',');
    if (e.operator === 'In') parts.push(`${e.key} in (${vs})`);
    else if (e.operator === 'NotIn') parts.push(`${e.key} notin (${vs})`);
    else if (e.operator === 'Exists') parts.push(e.key);
    else if (e.operator === 'DoesNotExist') parts.push(`!${e.key}`);
  }
  return parts.length > 0 ? parts.join(',') : undefined;
}

/** What kubectl prints as a Pod's STATUS. */
function podStatus(p: KubePod): string {
  if (p.metadata?.deletionTimestamp) return 'Terminating';
  for (const c of p.status?.containerStatuses ?? []) {
    const why = c.state?.waiting?.reason ?? c.state?.terminated?.reason;
    if (why) return why;
  }
  return p.status?.reason ?? p.status?.phase ?? 'Pending';
}

/** Pods shown per workload and cluster: the last answer, or the member's refusal. */
type PodsShown = Map<string, KubePod[] | string>;

function podList(got: KubePod[] | string, inst: string, cluster: string, ns: string) {
  if (typeof got === 'string') return h('div', { class: 'pods error' }, got);
  if (got.length === 0) return h('div', { class: 'pods muted' }, 'no pods');
  return h(
    'ul',
    { class: 'pods' },
    got.map((p) => {
      const statuses = p.status?.containerStatuses ?? [];
      const ready = statuses.filter((c) => c.ready).length;
      const restarts = statuses.reduce((n, c) => n + (c.restartCount ?? 0), 0);
      const status = podStatus(p);
      return h(
        'li',
        { 'data-pod': p.metadata?.name ?? '', 'data-status': status },
        h('code', {}, p.metadata?.name ?? ''),
        ` ${status} · ${ready}/${p.spec?.containers?.length ?? 0} ready`,
        restarts > 0 && ` · ${restarts} restarts`,
        p.spec?.nodeName && h('span', { class: 'muted' }, ` on ${p.spec.nodeName}`),
        p.status?.podIP && h('span', { class: 'muted' }, ` · ${p.status.podIP}`),
        h('button', { class: 'small link', onclick: () => openLog(`${p.metadata?.name ?? ''}`, `on ${cluster}`, podLog(inst, cluster, ns, p.metadata?.name ?? '')) }, 'Log'),
      );
    }),
  );
}

/** Reads the Pods of every open panel again (on each refresh of the page). */
async function refreshPods(inst: string, workloads: Workload[], pods: PodsShown) {
  await Promise.all(
    [...pods.keys()].map(async (key) => {
      const [id, cluster] = key.split('@');
      const w = workloads.find((x) => `${x.metadata?.namespace}/${x.kind}/${x.metadata?.name}` === id);
      const selector = w && podSelector(w);
      if (!w || !selector || !cluster) {
        pods.delete(key);
        return;
      }
      try {
        pods.set(key, await memberPods(inst, cluster, w.metadata?.namespace ?? '', selector));
      } catch (e) {
        pods.set(key, (e as Error).message);
      }
    }),
  );
}

function workloadRows(inst: string, w: Workload[], shown: Map<string, Overrides | string>, pods: PodsShown, refresh: () => void) {
  return w.map((w) => {
    const id = `${w.metadata?.namespace}/${w.metadata?.name}`;
    const placement = w.placement;
    const status = new Map((placement?.aggregatedStatus ?? []).map((s) => [s.clusterName, s]));
    return h(
      'tr',
      { 'data-workload': id },
      h('td', {}, id, h('div', { class: 'muted' }, w.kind ?? '', ' · ', h('a', { class: 'trace-link', href: `#/instances/${encodeURIComponent(inst)}/trace/${encodeURIComponent(w.kind ?? '')}/${encodeURIComponent(w.metadata?.namespace ?? '')}/${encodeURIComponent(w.metadata?.name ?? '')}` }, 'trace'))),
      h('td', {}, `${w.readyReplicas ?? 0}/${w.replicas ?? 0}`),
      h(
        'td',
        {},
        (placement?.clusters ?? []).map((c) => {
          const s = status.get(c.name);
          const key = `${w.metadata?.namespace}/${w.kind}/${w.metadata?.name}@${c.name}`;
          const got = pods.get(key);
          const toggle = () => {
            if (got === undefined) pods.set(key, []);
            else pods.delete(key);
            refresh();
          };
          return h(
            'div',
            { class: 'placement', 'data-cluster': c.name ?? '' },
            `${c.name}: ${c.replicas ?? 0} replica${c.replicas === 1 ? '' : 's'}`,
            s ? ` · ready ${s.readyReplicas ?? 0}/${s.replicas ?? 0}${s.health ? ` · ${s.health}` : ''}` : ' · no status yet',
            podSelector(w) && h('button', { class: 'small link', onclick: toggle, 'aria-expanded': String(got !== undefined) }, got === undefined ? 'Pods' : 'Hide pods'),
            got !== undefined && podList(got, inst, c.name ?? '', w.metadata?.namespace ?? ''),
          );
        }),
        !placement?.bindingName && h('span', { class: 'muted' }, 'not propagated'),
        // Failover under way: Karmada moves the workload off these clusters.
        ...(placement?.evictions ?? []).map((e) => h('div', { class: 'eviction muted', 'data-cluster': e.cluster ?? '' }, `leaving ${e.cluster}${e.inProgress ? '' : ' (done)'}: ${e.reason ?? ''}${e.producer ? ` (${e.producer})` : ''}`)),
      ),
      h('td', {}, (w.policies ?? []).map((p) => h('div', { class: 'policy', 'data-claimed': String(p.claimed ?? false) }, `${p.kind} ${p.namespace ? `${p.namespace}/` : ''}${p.name}`, p.kind?.endsWith('PropagationPolicy') && !p.claimed && h('span', { class: 'muted' }, ' (claim pending)')))),
      h('td', { class: 'overrides' }, overridesCell(inst, w, shown, refresh)),
    );
  });
}

/** The policy editor: YAML or JSON, saved with PUT (edit) or POST (new); the server's
 *  field violations are listed beside the text. */
function editor(inst: string, initial: unknown, create: boolean, readOnly: boolean, done: () => void) {
  let format: 'yaml' | 'json' = 'yaml';
  const text = h('textarea', { class: 'code', rows: 22, spellcheck: 'false', 'aria-label': 'policy' }) as HTMLTextAreaElement;
  text.readOnly = readOnly;
  const errors = h('div', { class: 'violations', role: 'alert' });
  const show = (obj: unknown) => {
    text.value = format === 'yaml' ? stringify(obj) : JSON.stringify(obj, null, 2);
  };
  const current = (): unknown => (format === 'yaml' ? parse(text.value) : JSON.parse(text.value));
  const switchTo = (f: 'yaml' | 'json') => {
    try {
      const obj = current();
      format = f;
      show(obj);
    } catch (e) {
      mount(errors, `cannot switch format: ${(e as Error).message}`);
    }
  };
  const save = async () => {
    mount(errors);
    let obj: unknown;
    try {
      obj = current();
    } catch (e) {
      mount(errors, h('div', { class: 'violation' }, `${format.toUpperCase()}: ${(e as Error).message}`));
      return;
    }
    try {
      await api.savePolicy(inst, JSON.stringify(obj), create);
      done();
    } catch (e) {
      if (e instanceof ApiError && e.violations.length > 0) {
        mount(errors, e.violations.map((v) => h('div', { class: 'violation', 'data-field': v.field ?? '' }, h('code', {}, v.field ?? ''), ' ', v.description ?? '')));
      } else {
        mount(errors, h('div', { class: 'violation' }, (e as Error).message));
      }
    }
  };
  show(initial);
  return h(
    'div',
    { class: 'editor', id: 'policy-editor' },
    h(
      'div',
      { class: 'actions' },
      h('button', { class: 'small', onclick: () => switchTo('yaml') }, 'YAML'),
      h('button', { class: 'small', onclick: () => switchTo('json') }, 'JSON'),
      !readOnly && h('button', { class: 'primary small', onclick: save }, create ? 'Create' : 'Save'),
      h('button', { class: 'small', onclick: done }, 'Close'),
    ),
    h('div', { class: 'editor-body' }, text, errors),
  );
}

function policyRows(policies: Policy[], canEdit: boolean, open: (p: Policy, edit: boolean) => void) {
  return policies.map((p) => {
    const id = `${p.metadata?.namespace ? `${p.metadata.namespace}/` : ''}${p.metadata?.name}`;
    return h(
      'tr',
      { 'data-policy': id },
      h('td', {}, p.kind ?? ''),
      h('td', {}, id),
      h('td', {}, (p.resourceSelectors ?? []).map((s) => h('div', {}, `${s.kind}${s.name ? ` ${s.name}` : ''}`))),
      h('td', {}, (p.clusterNames ?? []).join(', ')),
      h('td', {}, p.priority ?? 0),
      h('td', {}, h('button', { class: 'small', onclick: () => open(p, false) }, 'View'), canEdit && h('button', { class: 'small', onclick: () => open(p, true) }, 'Edit')),
    );
  });
}

/** Saves the instance's kubeconfig (the caller's token in it) as <instance>.kubeconfig. */
async function downloadKubeconfig(inst: string, report: (e: unknown) => void) {
  try {
    const k = await api.kubeconfig(inst);
    const url = URL.createObjectURL(new Blob([k.kubeconfig ?? ''], { type: 'application/yaml' }));
    const a = h('a', { href: url, download: `${inst}.kubeconfig` });
    document.body.append(a);
    a.click();
    a.remove();
    // After the browser has taken the file.
    setTimeout(() => URL.revokeObjectURL(url), 1000);
  } catch (e) {
    report(e);
  }
}

type Certificate = NonNullable<NonNullable<Instance['status']>['certificates']>[number];

/** The instance's certificates, with "Renew" for an admin of a managed instance. */
function certificatesSection(i: Instance, canAdmin: boolean, done: () => void, report: (e: unknown) => void) {
  const certs = i.status?.certificates ?? [];
  if (certs.length === 0) return null;
  const inst = i.metadata?.name ?? '';
  const expiring = (i.status?.conditions ?? []).some((c) => c.type === 'CertificatesExpiring' && c.status === 'True');
  return [
    h(
      'h3',
      {},
      'Certificates ',
      canAdmin && i.spec?.mode === 'INSTANCE_MODE_MANAGED' && h('button', { class: 'small', id: 'renew-certificates', onclick: () => void renewCertificates(inst, done, report) }, 'Renew'),
    ),
    table('certificates', ['Certificate', 'Subject', 'Expires', 'Left'], certificateRows(certs, expiring)),
  ];
}

/** The instance's class, and where it differs from it, as a diff: the class's value
 *  struck through, the instance's beside it; its own settings (which a class rollout
 *  keeps) marked. */
function classSection(i: Instance) {
  const cls = i.spec?.className;
  if (!cls) return null;
  const drift = i.status?.drift ?? [];
  return [
    h('h3', {}, `Class ${cls}`),
    drift.length === 0
      ? h('p', { class: 'muted', id: 'class-drift' }, 'In line with its class.')
      : table(
          'class-drift',
          ['Field', 'Class', 'Instance', ''],
          drift.map((d) =>
            h(
              'tr',
              { 'data-field': d.field ?? '' },
              h('td', {}, h('code', {}, d.field ?? '')),
              h('td', {}, h('del', {}, d.classValue ?? '')),
              h('td', {}, h('ins', {}, d.instanceValue ?? '')),
              h('td', { class: 'muted' }, d.overridden ? 'its own setting (kept by class rollouts)' : 'drift: a rollout of the class sets it'),
            ),
          ),
        ),
  ];
}

/** Renews a managed instance's leaf certificates after a confirmation, then says what was
 * renewed and which components roll onto them. */
async function renewCertificates(inst: string, done: () => void, report: (e: unknown) => void) {
  const why = 'Its leaf certificates are re-signed with the same CAs and keys, then every component but etcd restarts on them (the instance shows Upgrading meanwhile).';
  if (!(await confirmDialog(`Renew the certificates of ${inst}?`, why, 'Renew'))) return;
  try {
    const r = await api.renewCertificates(inst);
    report(new Error(`Renewed ${(r.certificates ?? []).length} certificates; rolling ${(r.rolled ?? []).join(', ')}.`));
  } catch (e) {
    report(e);
  }
  done();
}

/** The certificates the instance is reached with, the first to expire first; those within
 *  the warning (the instance's CertificatesExpiring condition) are marked. */
function certificateRows(certs: Certificate[], warning: boolean) {
  const now = Date.now();
  return certs.map((c, i) => {
    const at = Date.parse(c.notAfter ?? '');
    const days = Number.isNaN(at) ? undefined : Math.floor((at - now) / 86_400_000);
    const soon = (warning && i === 0) || (days !== undefined && days < 0);
    return h(
      'tr',
      { 'data-certificate': c.name ?? '' },
      h('td', {}, c.name ?? ''),
      h('td', { class: 'muted' }, c.subject ?? ''),
      h('td', {}, c.notAfter ?? ''),
      h('td', { class: soon ? 'error' : '' }, days === undefined ? '' : days < 0 ? 'expired' : `${days} days`),
    );
  });
}

function table(id: string, heads: string[], rows: Node[]) {
  return h('table', { class: 'grid', id }, h('thead', {}, h('tr', {}, heads.map((t) => h('th', {}, t)))), h('tbody', {}, rows));
}

/** Renders the page into `root`; returns its refresh function for polling. */
/** `focus`: `namespace/name` of a workload to bring into view (a search result's link). */
export function instancePage(root: Element, inst: string, canEdit: boolean, canAdmin: boolean, report: (e: unknown) => void, focus?: string) {
  const live = h('div');
  const joinSlot = h('div', { id: 'join' });
  const removals = new Map<string, Removal>();
  const closeJoin = () => {
    mount(joinSlot, joinButton);
    void refresh();
  };
  // Pull mode: a fresh bootstrap token and the command to run against the member.
  const pull = async () => {
    const out = h('pre', { class: 'code', id: 'register-command' }, 'creating a token…');
    mount(joinSlot, h('h3', {}, 'Register a member in Pull mode'), h('p', { class: 'muted' }, 'Run this against the member cluster (karmadactl deploys karmada-agent there); the token is shown once.'), out, h('button', { class: 'small', onclick: closeJoin }, 'Close'));
    try {
      const t = await api.registrationToken(inst);
      mount(out, t.registerCommand ?? '');
      out.after(h('p', { class: 'muted' }, `expires ${t.expiration ?? ''}`));
    } catch (e) {
      mount(out, (e as Error).message);
      out.classList.add('error');
    }
  };
  const joinButton = canAdmin
    ? h('span', {}, h('button', { class: 'small', onclick: () => mount(joinSlot, h('h3', {}, 'Join a member cluster'), joinForm(inst, closeJoin)) }, 'Join a member cluster'), ' ', h('button', { class: 'small', onclick: () => void pull() }, 'Pull mode: registration command'))
    : h('span');
  mount(joinSlot, joinButton);
  const events = h('div', { id: 'events' });
  const componentsSlot = h('div');
  const backupsSlot = h('div');
  const controllersSlot = h('div');
  const promoteSlot = h('div');
  const closePromote = () => {
    mount(promoteSlot);
    void refresh();
  };
  const editorSlot = h('div');
  const closeEditor = () => {
    mount(editorSlot);
    void refresh();
  };
  const open = (p: Policy, edit: boolean) => {
    let obj: unknown = {};
    try {
      obj = JSON.parse(p.objectJson ?? '{}');
    } catch {
      obj = { error: 'the policy has no readable object' };
    }
    mount(editorSlot, h('h3', {}, `${edit ? 'Edit' : 'View'} ${p.kind} ${p.metadata?.name}`), editor(inst, obj, false, !edit, closeEditor));
  };
  const create = () => mount(editorSlot, h('h3', {}, 'New policy'), editor(inst, NEW_POLICY, true, false, closeEditor));
  mount(
    root,
    h('p', {}, h('a', { href: '#/' }, '← Fleet')),
    h('h2', {}, `Instance ${inst}`),
    live,
    joinSlot,
    h('h3', {}, 'Policies ', canEdit && h('button', { class: 'small', onclick: create }, 'New policy')),
    h('div', { id: 'policies' }),
    editorSlot,
    h('h3', {}, 'Recent events'),
    events,
  );
  const shown = new Map<string, Overrides | string>();
  const pods: PodsShown = new Map();
  let focused = false;
  const showEvents = async () => {
    try {
      const list = await recentEvents(inst, EVENTS_SHOWN);
      mount(events, list.length === 0 ? h('p', { class: 'muted' }, 'No events.') : table('events', ['Last seen', 'Type', 'Reason', 'Object', 'Message'], eventRows(list)));
    } catch (e) {
      mount(events, h('p', { class: 'muted' }, `Events are not readable: ${(e as Error).message}`));
    }
  };
  const refresh = async () => {
    void showEvents();
    try {
      const [i, clusters, workloads, policies] = await Promise.all([api.instance(inst), api.clusters(inst), api.workloads(inst), api.policies(inst)]);
      await refreshPods(inst, workloads, pods);
      if (i.spec?.mode === 'INSTANCE_MODE_MANAGED') await showComponents(componentsSlot, inst, canAdmin, () => void refresh(), report);
      await showBackups(backupsSlot, i, canAdmin, () => void refresh(), report);
      await showControllers(controllersSlot, inst);
      mount(
        live,
        h('p', {}, phaseBadge(i.status?.phase), ' ', h('span', { class: 'why' }, explanation(i.status?.conditions))),
        h('p', { class: 'actions' }, h('a', { id: 'resources-link', href: `#/instances/${encodeURIComponent(inst)}/resources` }, 'All resources'), ' · ', h('a', { id: 'trace-any', href: `#/instances/${encodeURIComponent(inst)}/trace` }, 'Trace a template'), ' · ', h('button', { class: 'small link', id: 'download-kubeconfig', title: 'A kubeconfig for kubectl, karmadactl and helm through Kairship, with your token', onclick: () => void downloadKubeconfig(inst, report) }, 'Download kubeconfig')),
        h('h3', {}, 'Member clusters'),
        table('clusters', ['Cluster', 'Ready', 'Version', 'Nodes', 'Allocated / allocatable', 'Taints', ''], clusterRows(inst, clusters, new Map((i.status?.sharedMembers ?? []).map((m) => [m.cluster ?? '', m.instances ?? []])), canAdmin, removals, () => void refresh(), report)),
        classSection(i),
        componentsSlot,
        certificatesSection(i, canAdmin, () => void refresh(), report),
        backupsSlot,
        controllersSlot,
        h('h3', {}, 'Workloads ', canEdit && h('button', { class: 'small', onclick: () => mount(promoteSlot, promoteForm(inst, clusters.map((c) => c.metadata?.name ?? ''), closePromote)) }, 'Adopt a running workload')),
        promoteSlot,
        table('workloads', ['Workload', 'Ready', 'Placement (per cluster)', 'Policies', 'Overrides'], workloadRows(inst, workloads, shown, pods, () => void refresh())),
      );
      const row = focus && root.querySelector(`#workloads tr[data-workload="${CSS.escape(focus)}"]`);
      if (row) {
        row.classList.add('focus');
        if (!focused) row.scrollIntoView({ block: 'center' });
        focused = true;
      }
      const slot = root.querySelector('#policies');
      if (slot) mount(slot, table('policy-table', ['Kind', 'Name', 'Selects', 'Clusters', 'Priority', ''], policyRows(policies, canEdit, open)));
    } catch (e) {
      // An unreachable instance answers 503 at once: show the instance's own status.
      try {
        const i = await api.instance(inst);
        // A managed instance that cannot serve: its components say why.
        if (i.spec?.mode === 'INSTANCE_MODE_MANAGED') await showComponents(componentsSlot, inst, canAdmin, () => void refresh(), report);
        await showBackups(backupsSlot, i, canAdmin, () => void refresh(), report);
        mount(
          live,
          h('p', {}, phaseBadge(i.status?.phase), ' ', h('span', { class: 'why' }, explanation(i.status?.conditions))),
          h('p', { class: 'error' }, (e as Error).message),
          classSection(i),
          componentsSlot,
          // Expired certificates are one reason an instance cannot serve: shown, and renewable.
          certificatesSection(i, canAdmin, () => void refresh(), report),
          // A broken instance is what a backup is for: shown, though restoring needs it to answer.
          backupsSlot,
        );
      } catch {
        report(e);
      }
    }
  };
  return refresh;
}
