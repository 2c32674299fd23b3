// The console in a real browser against the real `kairship demo`: sign-in, the fleet
// overview, a fault seen on screen, placement, policy validation, instance lifecycle,
// actor restarts, and what the viewer token does not see.

import { test, expect, type Page } from '@playwright/test';
import { spawnSync } from 'node:child_process';
import { copyFileSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';

const stateDir = process.env.KAIRSHIP_STATE_DIR ?? '';
const shots = process.env.CONSOLE_SCREENSHOTS ?? join(import.meta.dirname, '..', '..', 'docs');
const endpoints = JSON.parse(readFileSync(join(stateDir, 'endpoints.json'), 'utf8'));
const names: string[] = endpoints.instances.map((i: { name: string }) => i.name);
const viewerInstance: string = endpoints.tokens.viewer_instance;

test.describe.configure({ mode: 'serial' });

async function signIn(page: Page, token: string) {
  await page.goto(`${endpoints.http}/ui/`);
  await page.locator('#signin input[name="token"]').fill(token);
  await page.locator('#signin button[type="submit"]').click();
  await expect(page.locator('#instances')).toBeVisible();
}

const phaseOf = (page: Page, name: string) => page.locator(`#instances tr[data-instance="${name}"] [data-phase]`);

async function fault(name: string, body?: object) {
  const res = await fetch(`${endpoints.sim_admin}/faults/${name}`, {
    method: body ? 'POST' : 'DELETE',
    headers: { 'content-type': 'application/json' },
    body: body ? JSON.stringify(body) : undefined,
  });
  expect(res.ok, `sim_admin answered ${res.status}`).toBeTruthy();
}

test('a wrong token is refused and the sign-in form stays', async ({ page }) => {
  await page.goto(`${endpoints.http}/ui/`);
  await page.locator('#signin input[name="token"]').fill('not-a-token');
  await page.locator('#signin button[type="submit"]').click();
  await expect(page.locator('#signin')).toContainText('That token was not accepted');
});

test('a token in a link signs nobody in (login CSRF)', async ({ page }) => {
  await page.goto(`${endpoints.http}/ui/#token=${encodeURIComponent(endpoints.tokens.admin)}`);
  await expect(page.locator('#signin')).toContainText('Sign-in links are not accepted');
  await expect(page.locator('#instances')).toHaveCount(0);
  expect(page.url()).not.toContain('token=');
});

test('signs in through the OIDC provider and shows who signed in', async ({ page }) => {
  const login = process.env.KAIRSHIP_DEX_LOGIN ?? '';
  expect(login, 'the test runner starts Dex and names its user').not.toBe('');
  await page.goto(`${endpoints.http}/ui/`);
  await page.locator('#oidc-signin').click();
  // Dex's own login page.
  await page.locator('input[name="login"]').fill(login);
  await page.locator('input[name="password"]').fill(process.env.KAIRSHIP_DEX_PASSWORD ?? '');
  await page.locator('button[type="submit"]').click();
  // Back on the console with an ID token: the user and their roles (admin through the
  // group Dex gave them).
  await expect(page.locator('#instances')).toBeVisible();
  await expect(page.locator('#who')).toContainText(login);
  await expect(page.locator('#who')).toContainText('admin on every instance');
  await expect(page).not.toHaveURL(/code=/);
});

test('the overview lists every instance Running with its capacity', async ({ page }) => {
  await signIn(page, endpoints.tokens.admin);
  for (const name of names) {
    await expect(phaseOf(page, name)).toHaveText('Running', { timeout: 60_000 });
  }
  await expect(page.locator('#instances tbody tr')).toHaveCount(names.length);
  const first = page.locator(`#instances tr[data-instance="${names[0]}"]`);
  await expect(first.locator('[data-col="clusters"]')).toHaveText(/^(\d+)\/\1$/);
  // Used and allocatable in one unit: cores, binary memory units.
  await expect(first.locator('.bar-label').first()).toHaveText(/^CPU [\d.]+ \/ [\d.]+ cores$/);
  await expect(first.locator('.bar-label').nth(1)).toHaveText(/^Memory [\d.]+ [KMGTP]?i?B \/ [\d.]+ [KMGTP]?i?B$/);
  // When Kairship's proxy last answered for it (the console itself calls REST, not the proxy).
  await expect(first.locator('[data-col="last-request"]')).toHaveText(/^(never|\d+[smhd] ago)$/);
  await page.screenshot({ path: join(shots, 'console-overview.png'), fullPage: true });
});

test('a fault shows the instance Unreachable within 15 s, then Running again', async ({ page }) => {
  const victim = names[names.length - 1];
  await signIn(page, endpoints.tokens.admin);
  await expect(phaseOf(page, victim)).toHaveText('Running', { timeout: 30_000 });
  await fault(victim, { mode: 'down' });
  try {
    await expect(phaseOf(page, victim)).toHaveText('Unreachable', { timeout: 15_000 });
    await expect(page.locator(`#instances tr[data-instance="${victim}"] .why`)).toContainText('Reachable=False');
    // The others keep running.
    await expect(phaseOf(page, names[0])).toHaveText('Running');
    await page.screenshot({ path: join(shots, 'console-fault.png'), fullPage: true });
  } finally {
    await fault(victim);
  }
  await expect(phaseOf(page, victim)).toHaveText('Running', { timeout: 30_000 });
});

test("the instance page shows the nginx sample's placement and its policies", async ({ page }) => {
  await signIn(page, endpoints.tokens.admin);
  await page.click(`#instances tr[data-instance="${names[0]}"] a`);
  const nginx = page.locator('#workloads tr[data-workload="default/nginx"]');
  await expect(nginx.locator('.placement[data-cluster="member1"]')).toContainText('member1: 1 replica');
  await expect(nginx.locator('.placement[data-cluster="member2"]')).toContainText('member2: 1 replica');
  await expect(nginx.locator('.placement[data-cluster="member1"]')).toContainText('ready 1/1', { timeout: 30_000 });
  await expect(nginx).toContainText('PropagationPolicy default/nginx-propagation');
  // The Pod behind member1's replica, read from member1 through Karmada's cluster proxy.
  await nginx.locator('.placement[data-cluster="member1"] button', { hasText: 'Pods' }).click();
  const pod = nginx.locator('.placement[data-cluster="member1"] ul.pods li');
  await expect(pod).toHaveCount(1);
  await expect(pod).toHaveAttribute('data-pod', /^nginx-[a-z0-9]+-[a-z0-9]{5}$/);
  await expect(pod).toHaveAttribute('data-status', 'Running');
  await expect(pod).toContainText('1/1 ready');
  await expect(pod).toContainText('on member1-node-');
  // Its log, through Kairship's GetPodLogs (REST, one JSON object a line).
  await pod.locator('button', { hasText: 'Log' }).click();
  const log = page.getByRole('dialog', { name: /^log of nginx-/ });
  await expect(log.locator('pre.log')).toContainText('container nginx of pod nginx-');
  await log.locator('button', { hasText: 'Close' }).click();
  await expect(log).toHaveCount(0);
  // Adopting a running workload: nginx on member1 is the instance's already, and the
  // server says so.
  await page.locator('button', { hasText: 'Adopt a running workload' }).click();
  await page.locator('#promote-cluster').selectOption('member1');
  await page.locator('#promote-namespace').fill('default');
  await page.locator('#promote-name').fill('nginx');
  await page.locator('#promote-form button', { hasText: 'Promote' }).click();
  await expect(page.locator('#promote-outcome')).toContainText('already a resource template');
  await page.locator('#promote-form button', { hasText: 'Close' }).click();
  await expect(page.locator('#clusters tbody tr')).toHaveCount(3);
  // Overrides per cluster, read from the Works on request.
  await nginx.locator('td.overrides button', { hasText: 'Show' }).click();
  await expect(nginx.locator('.override[data-cluster="member2"]')).toContainText('/metadata/labels/env');
  await expect(nginx.locator('.override[data-cluster="member1"]')).toContainText('+ /metadata/annotations/env: skoala-stage');
  await expect(nginx.locator('.override[data-cluster="member1"]')).toContainText('OverridePolicy/nginx-op');
  // Karmada's events, read through the instance proxy with the caller's token.
  const scheduled = page.locator('#events tr[data-reason="ScheduleBindingSucceed"]');
  await expect(scheduled.filter({ hasText: 'Deployment default/nginx' }).first()).toContainText('member1:1, member2:1');
  await expect(page.locator('#events tr[data-reason="ApplyPolicySucceed"]').first()).toBeVisible();
  await page.screenshot({ path: join(shots, 'console-instance.png'), fullPage: true });

  // The policy as YAML, then a new policy the server refuses, with the field named.
  await page.locator('#policy-table tr[data-policy="default/nginx-propagation"] button', { hasText: 'View' }).click();
  await expect(page.locator('#policy-editor textarea')).toHaveValue(/kind: PropagationPolicy/);
  await page.locator('#policy-editor button', { hasText: 'JSON' }).click();
  await expect(page.locator('#policy-editor textarea')).toHaveValue(/"kind": "PropagationPolicy"/);
  await page.locator('#policy-editor button', { hasText: 'Close' }).click();
  await page.locator('button', { hasText: 'New policy' }).click();
  const text = page.locator('#policy-editor textarea');
  await text.fill((await text.inputValue()).replace('name: my-policy', 'name: Not_A_Name'));
  await page.locator('#policy-editor button', { hasText: 'Create' }).click();
  await expect(page.locator('#policy-editor .violation[data-field="object_json.metadata.name"]')).toContainText('not a valid name');
});

test("the nginx sample's propagation trace: its policy, binding, Works and each member, as a picture", async ({ page }) => {
  await signIn(page, endpoints.tokens.admin);
  await page.goto(`${endpoints.http}/ui/#/instances/${names[0]}`);
  await page.locator('#workloads tr[data-workload="default/nginx"] a.trace-link').click();
  const pic = page.locator('#trace-picture');
  await expect(pic.locator('[data-step="PropagationPolicy"]')).toContainText('default/nginx-propagation');
  await expect(pic.locator('[data-step="PropagationPolicy"]')).toContainText('claimed it');
  await expect(pic.locator('[data-step="PropagationPolicy"]')).toContainText('overridden by nginx-op');
  await expect(pic.locator('[data-step="ResourceBinding"]')).toContainText('nginx-deployment');
  await expect(pic.locator('[data-step="ResourceBinding"]')).toContainText('Scheduled: True');
  for (const c of ['member1', 'member2']) {
    const row = pic.locator(`.trace-row[data-cluster="${c}"]`);
    await expect(row.locator('[data-step="Work"]')).toContainText(`karmada-es-${c}/`);
    await expect(row.locator('[data-step="Work"]')).toContainText('Applied: True');
    await expect(row.locator('[data-step="Member"]')).toContainText('Healthy', { timeout: 30_000 });
  }
  await expect(pic.locator('.trace-row[data-cluster="member3"]')).toHaveCount(0);
  await expect(page.locator('#trace-events tr[data-reason="ApplyPolicySucceed"]').first()).toBeVisible();
  // The picture reads left to right: template, policy, binding, then Work and member.
  const shot = await pic.screenshot({ path: join(shots, 'console-trace.png') });
  expect(shot.length).toBeGreaterThan(1000);
  const x = async (sel: string) => (await pic.locator(sel).first().boundingBox())?.x ?? -1;
  const order = [await x('[data-step="Deployment"]'), await x('[data-step="PropagationPolicy"]'), await x('[data-step="ResourceBinding"]'), await x('[data-step="Work"]'), await x('[data-step="Member"]')];
  expect(order.every((v, i) => v >= 0 && (i === 0 || v > order[i - 1]))).toBe(true);

  // A policy that does not claim it is shown with why.
  const proxy = `${endpoints.http}/apis/kairship.io/v1alpha1/instances/${names[0]}/proxy`;
  const headers = { authorization: `Bearer ${endpoints.tokens.admin}`, 'content-type': 'application/json' };
  const made = await page.request.post(`${proxy}/apis/policy.karmada.io/v1alpha1/namespaces/default/propagationpolicies`, {
    headers,
    data: { apiVersion: 'policy.karmada.io/v1alpha1', kind: 'PropagationPolicy', metadata: { name: 'web-only', namespace: 'default' }, spec: { resourceSelectors: [{ apiVersion: 'apps/v1', kind: 'Deployment', name: 'web' }], placement: { clusterAffinity: { clusterNames: ['member1'] } } } },
  });
  expect(made.status()).toBe(201);
  await expect(page.locator('#trace-unclaimed li[data-policy="web-only"]')).toContainText('selects the name web', { timeout: 20_000 });

  // A Secret, traced from the form: its keys, never its value, anywhere on the page.
  const value = 'console-secret-value-never-shown';
  const secret = await page.request.post(`${proxy}/api/v1/namespaces/default/secrets`, {
    headers,
    data: { apiVersion: 'v1', kind: 'Secret', metadata: { name: 'console-db', namespace: 'default' }, stringData: { password: value } },
  });
  expect(secret.status()).toBe(201);
  await page.locator('#trace-kind').fill('secret');
  await page.locator('#trace-namespace').fill('default');
  await page.locator('#trace-name').fill('console-db');
  await page.locator('#trace-form button', { hasText: 'Trace' }).click();
  await expect(pic.locator('[data-step="Secret"]')).toContainText('keys: password');
  await expect(pic.locator('[data-step="PropagationPolicy"]')).toContainText('no policy selects it');
  const html = await page.content();
  expect(html).not.toContain(value);
  expect(html).not.toContain(Buffer.from(value).toString('base64'));
  await page.request.delete(`${proxy}/api/v1/namespaces/default/secrets/console-db`, { headers });
  await page.request.delete(`${proxy}/apis/policy.karmada.io/v1alpha1/namespaces/default/propagationpolicies/web-only`, { headers });
});

test('a member cluster joined to two instances is flagged on both', async ({ page }) => {
  await signIn(page, endpoints.tokens.admin);
  const cluster = (n: string) => `${endpoints.http}/apis/kairship.io/v1alpha1/instances/${n}/proxy/apis/cluster.karmada.io/v1alpha1/clusters/member1`;
  const headers = { authorization: `Bearer ${endpoints.tokens.admin}` };
  const id = (await (await page.request.get(cluster(names[0]), { headers })).json()).spec.id;
  const before = (await (await page.request.get(cluster(names[1]), { headers })).json()).spec.id;
  expect(id).toBeTruthy();
  // member1 of the second instance is the first's member1 (one Karmada cluster ID).
  const patch = (value: string) =>
    page.request.patch(cluster(names[1]), { headers: { ...headers, 'content-type': 'application/merge-patch+json' }, data: { spec: { id: value } } });
  expect((await patch(id)).status()).toBe(200);
  await page.goto(`${endpoints.http}/ui/#/instances/${names[0]}`);
  const flag = page.locator('#clusters tr[data-cluster="member1"] .tag.shared');
  await expect(flag).toContainText(`shared with ${names[1]}`, { timeout: 30_000 });
  await expect(page.locator('#clusters tr[data-cluster="member2"] .tag.shared')).toHaveCount(0);
  await page.goto(`${endpoints.http}/ui/#/instances/${names[1]}`);
  await expect(page.locator('#clusters tr[data-cluster="member1"] .tag.shared')).toContainText(`shared with ${names[0]}`, { timeout: 30_000 });
  // Its own ID again: no longer shared.
  expect((await patch(before)).status()).toBe(200);
  await expect(page.locator('#clusters tr[data-cluster="member1"] .tag.shared')).toHaveCount(0, { timeout: 30_000 });
});

test('all resources, kind by kind: YAML, a Secret by its keys only, CRDs and their objects, Works without YAML', async ({ page }) => {
  await signIn(page, endpoints.tokens.admin);
  const proxy = `${endpoints.http}/apis/kairship.io/v1alpha1/instances/${names[0]}/proxy`;
  const headers = { authorization: `Bearer ${endpoints.tokens.admin}`, 'content-type': 'application/json' };
  const value = 'resource-page-secret-never-shown';
  expect((await page.request.post(`${proxy}/api/v1/namespaces/default/configmaps`, { headers, data: { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'console-cm' }, data: { color: 'blue' } } })).status()).toBe(201);
  expect((await page.request.post(`${proxy}/api/v1/namespaces/default/secrets`, { headers, data: { apiVersion: 'v1', kind: 'Secret', metadata: { name: 'console-keys' }, stringData: { token: value } } })).status()).toBe(201);
  await page.goto(`${endpoints.http}/ui/#/instances/${names[0]}`);
  await page.locator('#resources-link').click();
  const tab = (name: string) => page.locator(`#resource-tabs button[data-tab="${name}"]`).click();
  const row = (name: string) => page.locator(`#resource-table tr[data-name="${name}"]`);
  await tab('ConfigMaps');
  await row('console-cm').locator('button', { hasText: 'YAML' }).click();
  await expect(page.locator('#resource-yaml')).toContainText('color: blue');
  await tab('Secrets');
  await expect(row('console-keys').locator('button', { hasText: 'YAML' })).toHaveCount(0);
  await row('console-keys').locator('button', { hasText: 'Keys' }).click();
  await expect(page.locator('#resource-yaml')).toContainText('- token');
  expect(await page.content()).not.toContain(value);
  await tab('CRDs');
  await row('propagationpolicies.policy.karmada.io').locator('button', { hasText: 'Objects' }).click();
  await row('nginx-propagation').locator('button', { hasText: 'YAML' }).click();
  await expect(page.locator('#resource-yaml')).toContainText('kind: PropagationPolicy');
  await tab('ResourceBindings');
  await expect(row('nginx-deployment')).toBeVisible();
  await tab('Works');
  await expect(page.locator('#resource-table tbody tr').first()).toBeVisible();
  await expect(page.locator('#resource-table button', { hasText: 'YAML' })).toHaveCount(0);
  expect(await page.content()).not.toContain(value);
  // A ConfigMap's trace, from its row.
  await tab('ConfigMaps');
  await row('console-cm').locator('a.trace-link').click();
  await expect(page.locator('#trace-picture [data-step="ConfigMap"]')).toContainText('default/console-cm');
  await expect(page.locator('#trace-picture [data-step="ConfigMap"]')).toContainText('keys: color');
  await page.request.delete(`${proxy}/api/v1/namespaces/default/configmaps/console-cm`, { headers });
  await page.request.delete(`${proxy}/api/v1/namespaces/default/secrets/console-keys`, { headers });
});

test('the search box finds nginx in every instance and links to it', async ({ page }) => {
  await signIn(page, endpoints.tokens.admin);
  await page.locator('#search').fill('app=nginx');
  await page.locator('#search').press('Enter');
  for (const name of names) {
    await expect(page.locator(`#hits tr[data-hit="${name}/Deployment/default/nginx"]`)).toContainText('member1: 1');
  }
  await page.locator(`#hits tr[data-hit="${names[1]}/Deployment/default/nginx"] a`, { hasText: 'default/nginx' }).click();
  await expect(page).toHaveURL(new RegExp(`#/instances/${names[1]}/workloads/default/nginx$`));
  await expect(page.locator('#workloads tr[data-workload="default/nginx"]')).toHaveClass(/focus/);
});

test("the viewer's search covers its one instance", async ({ page }) => {
  await signIn(page, endpoints.tokens.viewer);
  await page.locator('#search').fill('nginx');
  await page.locator('#search').press('Enter');
  await expect(page.locator('#hits tbody tr')).not.toHaveCount(0);
  for (const row of await page.locator('#hits tbody tr').all()) {
    await expect(row).toHaveAttribute('data-hit', new RegExp(`^${viewerInstance}/`));
  }
});

test("the instance page lists the instance's certificates with their expiry", async ({ page }) => {
  await signIn(page, endpoints.tokens.admin);
  await page.goto(`${endpoints.http}/ui/#/instances/${names[0]}`);
  const serving = page.locator('#certificates tr[data-certificate="karmada-apiserver serving"]');
  await expect(serving).toContainText(/36[3-5] days/);
  await expect(page.locator('#certificates tr[data-certificate="kubeconfig CA"]')).toBeVisible();
});

test("the instance page lists the instance's controllers and how their work went", async ({ page }) => {
  await signIn(page, endpoints.tokens.admin);
  await page.goto(`${endpoints.http}/ui/#/instances/${names[0]}`);
  const registration = page.locator('#controllers tr[data-controller="registration"]');
  await expect(registration.locator('[data-col="enabled"]')).toHaveText('yes');
  await expect(registration.locator('[data-col="succeeded"]')).toHaveText(/^\d{4}-\d\d-\d\dT/);
  await expect(page.locator('#controllers tr[data-controller="scheduled-backups"]')).toBeVisible();
});

test('back up an instance, restore the backup, and schedule backups', async ({ page }) => {
  await signIn(page, endpoints.tokens.admin);
  await page.goto(`${endpoints.http}/ui/#/instances/${names[0]}`);
  await page.locator('#create-backup').click();
  const done = page.locator('#backups tbody tr[data-phase="Completed"]').first();
  await expect(done).toBeVisible({ timeout: 30_000 });
  await expect(done).toContainText(/objects of \d+ resources/);
  await done.locator('button', { hasText: 'Restore' }).click();
  await page.getByRole('dialog').locator('button', { hasText: 'Restore' }).click();
  // Everything it holds is there already: nothing created, nothing failed.
  await expect(page.locator('#notice')).toContainText(/Restored: 0 created, \d+ already there, 0 failed/);
  await page.locator('#notice button', { hasText: 'Dismiss' }).click();
  await page.locator('#backup-schedule').click();
  const schedule = page.getByRole('dialog', { name: `Back up ${names[0]} every` });
  await schedule.getByRole('spinbutton').fill('720');
  await schedule.locator('button', { hasText: 'Apply' }).click();
  await expect(page.locator('#backup-schedule-text')).toHaveText('Every 720 minutes, the newest 7 kept.');
  await page.screenshot({ path: join(shots, 'console-backups.png'), fullPage: true });
});

test('cordon and uncordon a member cluster', async ({ page }) => {
  await signIn(page, endpoints.tokens.admin);
  await page.goto(`${endpoints.http}/ui/#/instances/${names[0]}`);
  const row = page.locator('#clusters tr[data-cluster="member3"]');
  await row.locator('button', { hasText: 'Cordon' }).click();
  await expect(row).toContainText('cordoned');
  await row.locator('button', { hasText: 'Uncordon' }).click();
  await expect(row).not.toContainText('cordoned');
});

test('removing a member that runs workloads is refused naming them; an unreachable member is not joined', async ({ page }) => {
  await signIn(page, endpoints.tokens.admin);
  await page.goto(`${endpoints.http}/ui/#/instances/${names[0]}`);
  const row = page.locator('#clusters tr[data-cluster="member1"]');
  await row.locator('button', { hasText: 'Remove' }).click();
  await expect(row.locator('.removal')).toContainText('default/Deployment/nginx');
  await expect(row.locator('button', { hasText: 'Remove anyway' })).toBeVisible();
  // A member at an address nothing listens on: the server says so, nothing is joined.
  const ca = Buffer.from(readFileSync(endpoints.ca, 'utf8')).toString('base64');
  const kubeconfig = `apiVersion: v1
kind: Config
clusters: [{name: m, cluster: {server: "https://127.0.0.1:1", certificate-authority-data: ${ca}}}]
users: [{name: m, user: {token: t}}]
contexts: [{name: m, context: {cluster: m, user: m}}]
current-context: m
`;
  await page.locator('#join button', { hasText: 'Join a member cluster' }).click();
  await page.locator('#join-name').fill('member9');
  await page.locator('#join-kubeconfig').fill(kubeconfig);
  await page.locator('#join-form button', { hasText: 'Join' }).click();
  await expect(page.locator('#join-error')).toContainText('unreachable');
  await expect(page.locator('#clusters tr[data-cluster="member9"]')).toHaveCount(0);
  // Pull mode: the register command with a fresh token and the CA pin.
  await page.locator('#join button', { hasText: 'Close' }).click();
  await page.locator('#join button', { hasText: 'Pull mode' }).click();
  await expect(page.locator('#register-command')).toContainText(/^karmadactl register \S+ --token [a-z0-9]{6}\.[a-z0-9]{16} --discovery-token-ca-cert-hash sha256:[0-9a-f]{64}$/);
});

test('restarting an instance actor from the actors page counts a restart', async ({ page }) => {
  await signIn(page, endpoints.tokens.admin);
  await page.click('header a[href="#/actors"]');
  const row = page.locator(`#actors tr[data-instance="${names[0]}"]`);
  // A requested restart is not a failure: it is counted apart.
  const restarts = row.locator('[data-col="requested"]');
  const before = Number(await restarts.textContent());
  await row.locator('button', { hasText: 'Restart' }).click();
  await expect(page.getByRole('dialog')).toContainText(`Restart the actor of ${names[0]}`);
  await page.getByRole('dialog').locator('button', { hasText: `Restart ${names[0]}` }).click();
  await expect(async () => {
    expect(Number(await restarts.textContent())).toBeGreaterThan(before);
  }).toPass({ timeout: 15_000 });
  await expect(row.locator('[data-col="restarts"]')).toHaveText('0');
  await expect(page.locator('#actors tr[data-actor="root"]')).toBeVisible();
  await page.screenshot({ path: join(shots, 'console-actors.png'), fullPage: true });
});

test('create a managed instance, see the server refuse a bad name, then delete it', async ({ page }) => {
  await signIn(page, endpoints.tokens.admin);
  await page.click('header a[href="#/new"]');
  const name = page.locator('[data-field="instance.metadata.name"]');
  await name.locator('input').fill('Bad Name');
  await page.locator('#create-instance button[type="submit"]').click();
  await expect(name.locator('.field-error')).toContainText('not a valid name');
  await name.locator('input').fill('console-e2e');
  // What an air-gapped cluster sets, checked by the server field by field.
  const crds = page.locator('[data-field="instance.spec.crd_tarball_url"]');
  await crds.locator('input').fill('ftp://mirror.example/crds.tar.gz');
  await page.locator('#create-instance button[type="submit"]').click();
  await expect(crds.locator('.field-error')).toContainText('http or https');
  await crds.locator('input').fill('');
  // Images the host would run come only from the registries Kairship's operator allows.
  const registry = page.locator('[data-field="instance.spec.image_registry"]');
  await registry.locator('input').fill('registry.example.com/karmada');
  await page.locator('#create-instance button[type="submit"]').click();
  await expect(registry.locator('.field-error')).toContainText('not from an allowed image registry');
  await registry.locator('input').fill('docker.io/karmada');
  await page.locator('#create-instance button[type="submit"]').click();
  await expect(page.locator('h2')).toHaveText('Instance console-e2e');
  await page.click('header a[href="#/"]');
  await expect(phaseOf(page, 'console-e2e')).toHaveText('Running', { timeout: 60_000 });
  // What its control plane takes in the host: six pods, none asking for resources here.
  await expect(page.locator('#instances tr[data-instance="console-e2e"] [data-col="control-plane"]')).toHaveText(
    'control plane: 6 pods, 0 CPU, 0 memory',
    { timeout: 60_000 },
  );
  // Its control plane: the components karmada-operator runs, a log, a restart.
  await page.click('#instances tr[data-instance="console-e2e"] a');
  const apiserver = page.locator('#components tr[data-component="karmada-apiserver"]');
  await expect(apiserver).toHaveAttribute('data-health', 'Healthy', { timeout: 30_000 });
  await expect(page.locator('#components tbody tr')).toHaveCount(6);
  await apiserver.locator('button', { hasText: 'Log' }).click();
  const log = page.getByRole('dialog', { name: 'log of karmada-apiserver' });
  await expect(log.locator('pre.log')).toContainText('container karmada-apiserver of pod console-e2e-karmada-apiserver-0');
  await log.locator('button', { hasText: 'Close' }).click();
  await page.locator('#components tr[data-component="karmada-scheduler"] button', { hasText: 'Restart' }).click();
  await page.getByRole('dialog', { name: 'Restart karmada-scheduler?' }).locator('button', { hasText: 'Restart' }).click();
  // The simulator runs no Deployment controller: the new rollout stays Progressing there.
  await expect(page.locator('#components tr[data-component="karmada-scheduler"]')).toHaveAttribute('data-health', /Healthy|Progressing/);
  // Replicas for high availability: etcd keeps an odd count; the scheduler goes to 2.
  await page.locator('#components tr[data-component="etcd"] button', { hasText: 'Scale' }).click();
  await page.getByRole('dialog', { name: 'Replicas of etcd' }).getByRole('spinbutton').fill('2');
  await page.getByRole('dialog', { name: 'Replicas of etcd' }).locator('button', { hasText: 'Apply' }).click();
  await expect(page.locator('#notice')).toContainText('odd count');
  await page.locator('#notice button', { hasText: 'Dismiss' }).click();
  await page.locator('#components tr[data-component="karmada-scheduler"] button', { hasText: 'Scale' }).click();
  await page.getByRole('dialog', { name: 'Replicas of karmada-scheduler' }).getByRole('spinbutton').fill('2');
  await page.getByRole('dialog', { name: 'Replicas of karmada-scheduler' }).locator('button', { hasText: 'Apply' }).click();
  await expect(page.locator('#components tr[data-component="karmada-scheduler"] td').nth(1)).toHaveText('2/2', { timeout: 30_000 });
  // Its certificates, karmada-operator's among them, renewed on request.
  await expect(page.locator('#certificates tr[data-certificate="console-e2e-karmada-cert/apiserver.crt"]')).toBeVisible({ timeout: 30_000 });
  // Refused while the (simulated) operator still applies the scale: retried.
  await expect(async () => {
    await page.locator('#renew-certificates').click();
    await page.getByRole('dialog', { name: 'Renew the certificates of console-e2e?' }).locator('button', { hasText: 'Renew' }).click();
    await expect(page.locator('#notice')).toContainText('Renewed 5 certificates; rolling', { timeout: 2_000 });
  }).toPass({ timeout: 30_000 });
  await page.click('header a[href="#/"]');
  // Hibernated from the overview, after the risk is spelt out; then woken.
  const row = page.locator('#instances tr[data-instance="console-e2e"]');
  await row.locator('[data-action="hibernate"]').click();
  const sleep = page.getByRole('dialog', { name: 'Hibernate instance console-e2e?' });
  await expect(sleep).toContainText('a failing member is not failed over');
  await sleep.locator('button', { hasText: 'Hibernate console-e2e' }).click();
  await expect(phaseOf(page, 'console-e2e')).toHaveText('Hibernated', { timeout: 60_000 });
  await expect(row.locator('[data-col="hibernation"]')).toHaveAttribute('data-state', 'Hibernated');
  await expect(row.locator('[data-col="hibernation"]')).toContainText('a command');
  await row.locator('[data-action="wake"]').click();
  await expect(phaseOf(page, 'console-e2e')).toHaveText('Running', { timeout: 60_000 });
  await expect(row.locator('[data-col="hibernation"]')).toContainText('woken 1×');
  await page.locator('#instances tr[data-instance="console-e2e"] button', { hasText: 'Delete' }).click();
  const dialog = page.getByRole('dialog');
  await expect(dialog).toContainText('the Instance "console-e2e" and its InstanceRegistration');
  await expect(dialog).toContainText('managed Karmada object');
  await dialog.locator('button', { hasText: 'Delete console-e2e' }).click();
  await expect(page.locator('#instances tr[data-instance="console-e2e"]')).toHaveCount(0, { timeout: 60_000 });
});

test('a rollout on the rollouts page: every step of its waves, then paused, resumed and aborted', async ({ page }) => {
  await signIn(page, endpoints.tokens.admin);
  const headers = { authorization: `Bearer ${endpoints.tokens.admin}` };
  const base = `${endpoints.http}/apis/kairship.io/v1alpha1`;
  // An InstanceClass, written to the host as a platform team would (kubectl apply).
  const kc = readFileSync(endpoints.host_kubeconfig, 'utf8');
  // (JSON or YAML: the server's and the token's values, quoted or not.)
  const hostServer = /"?server"?:\s*"?([^"\s,]+)/.exec(kc)?.[1] ?? '';
  const hostToken = /"?token"?:\s*"?([^"\s,]+)/.exec(kc)?.[1] ?? '';
  const cls = await page.request.post(`${hostServer}/apis/kairship.io/v1alpha1/instanceclasses`, {
    headers: { authorization: `Bearer ${hostToken}` },
    data: { apiVersion: 'kairship.io/v1alpha1', kind: 'InstanceClass', metadata: { name: 'console-class' }, spec: { karmadaVersion: 'v1.12.0', karmadaSpec: { featureGates: { Failover: true } } } },
  });
  expect(cls.ok(), await cls.text()).toBeTruthy();
  await expect(async () => {
    const created = await page.request.post(`${base}/instances`, {
      headers,
      data: { metadata: { name: 'roll-e2e', labels: { rollout: 'console' } }, spec: { mode: 'INSTANCE_MODE_MANAGED', className: 'console-class' } },
    });
    expect(created.ok(), await created.text()).toBeTruthy();
  }).toPass({ timeout: 15_000 });
  await expect(phaseOf(page, 'roll-e2e')).toHaveText('Running', { timeout: 60_000 });
  const start = async (name: string, version: string, soakSeconds: number) =>
    // Refused until the instance reports the release it runs (the plan blocks it).
    expect(async () => {
      const r = await page.request.post(`${base}/rollouts`, {
        headers,
        data: { name, spec: { karmadaVersion: version, matchLabels: { rollout: 'console' } }, options: { soakSeconds } },
      });
      expect(r.ok(), await r.text()).toBeTruthy();
    }).toPass({ timeout: 30_000 });
  await start('console-13', 'v1.13.0', 1);
  await page.click('header a[href="#/rollouts"]');
  const done = page.locator('#rollouts [data-rollout="console-13"]');
  await expect(done.locator('[data-col="phase"]')).toHaveText('Completed', { timeout: 90_000 });
  const step = done.locator('tr[data-instance="roll-e2e"]');
  await expect(step.locator('[data-col="step"]')).toHaveText('Done');
  await expect(step).toContainText('v1.12.0');
  // The waves as a picture: one wave, its instance's square Done.
  await expect(done.locator('[data-waves] [data-wave]')).toHaveCount(1);
  await expect(done.locator('[data-waves] [data-wave="1"] .wave-label')).toHaveText('Wave 1 · 1/1');
  await expect(done.locator('[data-waves] [data-cell="roll-e2e"]')).toHaveAttribute('data-step', 'Done');
  await expect(done.locator('button')).toHaveCount(0);
  // Its page: moved past its class's release, shown as a diff against the class.
  await step.locator('a').click();
  const drift = page.locator('#class-drift tr[data-field="/components/karmadaScheduler/imageTag"]');
  await expect(drift).toContainText('"v1.12.0"', { timeout: 30_000 });
  await expect(drift.locator('ins')).toHaveText('"v1.13.0"');
  await expect(page.locator('#class-drift tr[data-field="/featureGates/Failover"]')).toHaveCount(0);
  await page.click('header a[href="#/rollouts"]');
  // A rollout soaking for ten minutes: paused, resumed, then aborted after a confirmation.
  await start('console-14', 'v1.14.0', 600);
  const soaking = page.locator('#rollouts [data-rollout="console-14"]');
  await expect(soaking.locator('tr[data-instance="roll-e2e"] [data-col="step"]')).toHaveText('Soaking', { timeout: 90_000 });
  await expect(soaking.locator('[data-waves] [data-wave="1"]')).toHaveClass(/current/);
  await expect(soaking.locator('[data-waves] [data-cell="roll-e2e"]')).toHaveAttribute('title', 'roll-e2e: Soaking');
  await soaking.locator('button', { hasText: 'Pause' }).click();
  await expect(soaking.locator('[data-col="phase"]')).toHaveText('Paused', { timeout: 15_000 });
  await soaking.locator('button', { hasText: 'Resume' }).click();
  await expect(soaking.locator('[data-col="phase"]')).toHaveText('Progressing', { timeout: 15_000 });
  await soaking.locator('button', { hasText: 'Abort' }).click();
  await page.getByRole('dialog', { name: 'Abort rollout console-14?' }).locator('button', { hasText: 'Abort' }).click();
  await expect(soaking.locator('[data-col="phase"]')).toHaveText('Aborted', { timeout: 15_000 });
  await expect(soaking.locator('button')).toHaveCount(0);
  const gone = await page.request.delete(`${base}/instances/roll-e2e`, { headers });
  expect(gone.ok(), await gone.text()).toBeTruthy();
  await page.click('header a[href="#/"]');
  await expect(page.locator('#instances tr[data-instance="roll-e2e"]')).toHaveCount(0, { timeout: 60_000 });
});

test('the viewer sees only its instance and no admin actions', async ({ page }) => {
  await signIn(page, endpoints.tokens.viewer);
  await expect(page.locator('#instances tbody tr')).toHaveCount(1);
  await expect(page.locator(`#instances tr[data-instance="${viewerInstance}"]`)).toBeVisible();
  await expect(page.locator('#instances button', { hasText: 'Delete' })).toHaveCount(0);
  await expect(page.locator('header a[href="#/new"]')).toHaveCount(0);
  await page.click('header a[href="#/actors"]');
  await expect(page.locator(`#actors tr[data-instance="${viewerInstance}"]`)).toBeVisible();
  await expect(page.locator(`#actors tbody tr:not([data-instance="${viewerInstance}"])`)).toHaveCount(0);
  await expect(page.locator('#actors button', { hasText: 'Restart' })).toHaveCount(0);
  await page.goto(`${endpoints.http}/ui/#/instances/${viewerInstance}`);
  await expect(page.locator('#clusters tbody tr').first()).toBeVisible();
  await expect(page.locator('#clusters button', { hasText: 'Cordon' })).toHaveCount(0);
  await expect(page.locator('#clusters button', { hasText: 'Remove' })).toHaveCount(0);
  await expect(page.locator('#join button')).toHaveCount(0);
  await expect(page.locator('#backup-schedule-text')).toBeVisible();
  await expect(page.locator('#create-backup')).toHaveCount(0);
  // Its kubeconfig, downloaded: the instance's host as TLS server name, the viewer's own
  // token; kubectl reads through it (get --raw too) and is refused a write, as the role says.
  const [download] = await Promise.all([page.waitForEvent('download'), page.click('#download-kubeconfig')]);
  expect(download.suggestedFilename()).toBe(`${viewerInstance}.kubeconfig`);
  const kubeconfig = join(stateDir, `downloaded-${viewerInstance}.kubeconfig`);
  await download.saveAs(kubeconfig);
  const text = readFileSync(kubeconfig, 'utf8');
  expect(text).toContain(`tls-server-name: ${viewerInstance}.kairship.localtest`);
  expect(text).toContain(`token: ${endpoints.tokens.viewer}`);
  const kubectl = (...args: string[]) =>
    spawnSync(process.env.KUBECTL ?? 'kubectl', ['--kubeconfig', kubeconfig, ...args], { encoding: 'utf8' });
  const clusters = kubectl('get', 'clusters', '-o', 'name');
  expect(clusters.status, clusters.stderr).toBe(0);
  expect(clusters.stdout).toContain('cluster.cluster.karmada.io/member1');
  const version = kubectl('get', '--raw', '/version');
  expect(version.status, version.stderr).toBe(0);
  expect(JSON.parse(version.stdout).gitVersion).toMatch(/^v1\./);
  const write = kubectl('create', 'configmap', 'from-the-console', '-n', 'default');
  expect(write.status).not.toBe(0);
  expect(write.stderr).toContain('needs role "edit"');
  // Kairship's view role reaches the members too: the viewer reads nginx's Pod on member2.
  const nginx = page.locator('#workloads tr[data-workload="default/nginx"]');
  await nginx.locator('.placement[data-cluster="member2"] button', { hasText: 'Pods' }).click();
  await expect(nginx.locator('.placement[data-cluster="member2"] ul.pods li[data-status="Running"]')).toHaveCount(1);
  // Rollouts and the chaos report cover every instance: no links, and the API refuses.
  await expect(page.locator('header a[href="#/rollouts"]')).toHaveCount(0);
  await expect(page.locator('header a[href="#/chaos"]')).toHaveCount(0);
  await page.goto(`${endpoints.http}/ui/#/chaos`);
  await expect(page.locator('#chaos-missing')).toContainText('may not get chaosreports: it covers every instance');
});

test('the chaos page shows the latest report with its goals and picture', async ({ page }) => {
  await signIn(page, endpoints.tokens.admin);
  await page.click('header a[href="#/chaos"]');
  const dir = join(stateDir, 'chaos');
  rmSync(dir, { recursive: true, force: true });
  await page.locator('#page button', { hasText: 'Reload' }).click();
  await expect(page.locator('#chaos-missing')).toContainText('no chaos report yet');
  // A report as `kairship chaos run --state-dir DIR/chaos` leaves it (the committed one).
  mkdirSync(dir, { recursive: true });
  const docs = join(import.meta.dirname, '..', '..', 'docs');
  copyFileSync(join(docs, 'chaos-report.json'), join(dir, 'report.json'));
  copyFileSync(join(docs, 'chaos-report.svg'), join(dir, 'report.svg'));
  const report = JSON.parse(readFileSync(join(dir, 'report.json'), 'utf8'));
  await page.locator('#page button', { hasText: 'Reload' }).click();
  await expect(page.locator('#chaos-table tbody tr')).toHaveCount(report.experiments.length);
  const first = report.experiments[0];
  const row = page.locator(`#chaos-table tr[data-experiment="${first.name}"]`);
  await expect(row.locator('[data-col="result"]')).toHaveText(first.passed ? 'passed' : 'failed');
  await expect(row.locator('.goal')).toHaveCount(first.goals.length);
  await expect(page.locator('img.chaos-picture')).toBeVisible();
  expect(await page.locator('img.chaos-picture').evaluate((img: HTMLImageElement) => img.naturalWidth)).toBeGreaterThan(0);
  await page.screenshot({ path: join(shots, 'console-chaos.png'), fullPage: true });
});

test('Kairship serves the console and the OpenAPI document on its HTTPS address', async ({ request }) => {
  const redirect = await request.get(`${endpoints.http}/ui`, { maxRedirects: 0 });
  expect(redirect.status()).toBe(308);
  expect(redirect.headers()['location']).toBe('/ui/');
  const page = await request.get(`${endpoints.http}/ui/instances/anything`);
  expect(page.headers()['content-type']).toBe('text/html; charset=utf-8');
  expect(page.headers()['cache-control']).toBe('no-cache');
  const doc = await request.get(`${endpoints.http}/openapi.json`);
  expect(doc.ok()).toBeTruthy();
  expect((await doc.json()).paths['/apis/kairship.io/v1alpha1/instances'].get.operationId).toBe('InstanceService_ListInstances');
});
