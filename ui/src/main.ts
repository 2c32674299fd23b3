// The console's shell: sign-in with the OIDC provider Kairship trusts (authorization code
// with PKCE, see oidc.ts) or with a bearer token typed into its own form, hash routes, and
// polling. A token in a link is never taken: whoever sent the link would have the victim
// act as the sender (login CSRF), e.g. join a member cluster into the sender's instance. The REST API has no watch, so each page is re-read
// every POLL_MS.

import './style.css';
import { api, ApiError, atLeast, callerRoles, setToken, token, type Roles } from './client';
import { h, mount } from './dom';
import { overviewTable } from './overview';
import { instancePage } from './instance';
import { tracePage } from './trace';
import { resourcesPage } from './resources';
import { actorsTable } from './actors';
import { createForm } from './create';
import { chaosPage } from './chaos';
import { rolloutsView } from './rollouts';
import * as oidc from './oidc';
import { searchBox, searchPage } from './search';

const POLL_MS = 2000;
const app = document.getElementById('app') as HTMLElement;
let timer: number | undefined;
let generation = 0;

/// A `#token=` link signs nobody in: it is dropped from the address bar and history, and
/// the sign-in form says why.
function refuseTokenInLink(): string {
  if (!/^#token=/.test(location.hash)) return '';
  history.replaceState(null, '', `${location.pathname}#/`);
  return 'Sign-in links are not accepted: paste your token below, or sign in with your identity provider.';
}

let provider: oidc.OidcSettings | null = null;

function signIn(message = '') {
  const input = h('input', { type: 'password', name: 'token', placeholder: 'bearer token', autocomplete: 'off' }) as HTMLInputElement;
  const withProvider =
    provider &&
    h(
      'div',
      { class: 'sso' },
      h('button', { class: 'primary', type: 'button', id: 'oidc-signin', onclick: () => provider && oidc.begin(provider).catch((e: Error) => signIn(e.message)) }, 'Sign in with your identity provider'),
      h('p', { class: 'muted' }, `${provider.issuer}; or paste a token:`),
    );
  const form = h(
    'form',
    { class: 'form signin', id: 'signin' },
    h('h2', {}, 'Sign in to Kairship'),
    withProvider,
    h('p', { class: 'muted' }, 'Use a bearer token from the token file or your OIDC provider. The console sees exactly what the token may see.'),
    input,
    message && h('p', { class: 'error', role: 'alert' }, message),
    h('button', { class: provider ? '' : 'primary', type: 'submit' }, 'Sign in with the token'),
  );
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    setToken(input.value.trim());
    location.hash = '#/';
    void route();
  });
  mount(app, form);
}

function report(e: unknown) {
  const bar = document.getElementById('notice');
  if (!bar) return;
  const text = e instanceof ApiError ? `${e.status}: ${e.message}` : String((e as Error)?.message ?? e);
  mount(bar, h('span', {}, text), h('button', { class: 'small', onclick: () => mount(bar) }, 'Dismiss'));
}

function shell(roles: Roles) {
  const admin = atLeast(roles.fleet, 'admin');
  const main = h('main', { id: 'page' });
  mount(
    app,
    h(
      'header',
      {},
      h('strong', {}, 'Kairship'),
      h('nav', {}, h('a', { href: '#/' }, 'Fleet'), h('a', { href: '#/actors' }, 'Actors'), roles.fleet && h('a', { href: '#/rollouts' }, 'Rollouts'), roles.fleet && h('a', { href: '#/chaos' }, 'Chaos'), admin && h('a', { href: '#/new' }, 'New instance')),
      searchBox(),
      h('span', { class: 'who', id: 'who', 'data-role': roles.fleet }, `${roles.name} · ${roles.fleet ? `${roles.fleet} on every instance` : 'limited to some instances'}`),
      h('button', { class: 'small', onclick: () => { setToken(''); signIn(); } }, 'Sign out'),
    ),
    h('div', { id: 'notice', role: 'status' }),
    main,
  );
  return main;
}

function poll(run: () => Promise<void>) {
  const mine = generation;
  const tick = async () => {
    if (mine !== generation) return;
    await run();
    if (mine === generation) timer = window.setTimeout(tick, POLL_MS);
  };
  void tick();
}

async function route() {
  generation += 1;
  window.clearTimeout(timer);
  if (!token()) return signIn();
  let roles: Roles;
  try {
    roles = await callerRoles();
  } catch (e) {
    if (e instanceof ApiError && e.status === 401) return signIn('That token was not accepted.');
    return signIn(`Kairship did not answer: ${(e as Error).message}`);
  }
  const page = shell(roles);
  const hash = location.hash.replace(/^#/, '') || '/';
  const inst = /^\/instances\/([^/]+)(?:\/workloads\/([^/]+)\/([^/]+))?$/.exec(hash);
  const search = /^\/search\?q=(.*)$/.exec(hash);
  const trace = /^\/instances\/([^/]+)\/trace(?:\/([^/]+)\/([^/]+)\/([^/]+))?$/.exec(hash);
  const resources = /^\/instances\/([^/]+)\/resources$/.exec(hash);
  if (resources) {
    poll(resourcesPage(page, decodeURIComponent(resources[1]), report));
  } else if (trace) {
    const [, i, k, n, nm] = trace.map((x) => (x === undefined ? '' : decodeURIComponent(x)));
    poll(tracePage(page, i, k, n, nm, report));
  } else if (inst) {
    const name = decodeURIComponent(inst[1]);
    const focus = inst[2] ? `${decodeURIComponent(inst[2])}/${decodeURIComponent(inst[3])}` : undefined;
    poll(instancePage(page, name, atLeast(roles.on(name), 'edit'), atLeast(roles.on(name), 'admin'), report, focus));
  } else if (search) {
    searchPage(page, decodeURIComponent(search[1]));
  } else if (hash === '/actors') {
    const slot = h('div');
    mount(page, h('h2', {}, 'Actors'), h('p', { class: 'muted' }, 'The supervision tree on the replica that answered.'), slot);
    poll(async () => {
      try {
        mount(slot, actorsTable(await api.actors(), roles, () => void 0, report));
      } catch (e) {
        report(e);
      }
    });
  } else if (hash === '/rollouts') {
    const slot = h('div');
    mount(page, h('h2', {}, 'Rollouts'), h('p', { class: 'muted' }, 'Changes rolled across the fleet in waves: each instance backed up, changed and soaked; the first failure halts the rollout and rolls that instance back.'), slot);
    const admin = atLeast(roles.fleet, 'admin');
    const load = async () => {
      try {
        mount(slot, rolloutsView(await api.rollouts(), admin, () => void load(), report));
      } catch (e) {
        report(e);
      }
    };
    poll(load);
  } else if (hash === '/chaos') {
    chaosPage(page);
  } else if (hash === '/new') {
    createForm(page, (name) => (location.hash = `#/instances/${encodeURIComponent(name)}`));
  } else {
    const slot = h('div');
    mount(page, h('h2', {}, 'Fleet'), slot);
    poll(async () => {
      try {
        mount(slot, overviewTable(await api.instances(), roles, () => void 0, report));
      } catch (e) {
        report(e);
      }
    });
  }
}

async function start() {
  const refused = refuseTokenInLink();
  provider = await oidc.settings();
  if (refused) {
    setToken('');
    window.addEventListener('hashchange', () => void route());
    return signIn(refused);
  }
  try {
    const idToken = await oidc.finish();
    if (idToken) setToken(idToken);
  } catch (e) {
    window.addEventListener('hashchange', () => void route());
    return signIn(`Sign-in failed: ${(e as Error).message}`);
  }
  window.addEventListener('hashchange', () => void route());
  void route();
}

void start();
