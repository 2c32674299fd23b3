// Sign-in with the OIDC provider Kairship trusts, as Kubernetes' and Karmada's dashboards
// do it: the authorization code flow with PKCE (no client secret in the browser). The
// console learns the issuer and client id from /ui/config.json, sends the browser to the
// provider's login, and on return exchanges the code for an ID token, which it then uses
// as its bearer token like any other.

export type OidcSettings = { issuer: string; clientId: string; scopes: string[] };

const PENDING_KEY = 'kairship.oidc.pending';

type Pending = { verifier: string; state: string; tokenEndpoint: string; redirectUri: string; clientId: string };

/** The provider Kairship is configured with, if any. */
export async function settings(): Promise<OidcSettings | null> {
  const res = await fetch('/ui/config.json').catch(() => null);
  if (!res || !res.ok) return null;
  const body = (await res.json().catch(() => ({}))) as { oidc?: OidcSettings | null };
  return body.oidc ?? null;
}

function base64url(bytes: Uint8Array): string {
  let s = '';
  for (const b of bytes) s += String.fromCharCode(b);
  return btoa(s).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

function random(n: number): string {
  return base64url(crypto.getRandomValues(new Uint8Array(n)));
}

async function discovery(issuer: string): Promise<{ authorization_endpoint: string; token_endpoint: string }> {
  const res = await fetch(`${issuer.replace(/\/$/, '')}/.well-known/openid-configuration`);
  if (!res.ok) throw new Error(`${issuer} did not describe itself (HTTP ${res.status})`);
  return res.json();
}

/** The console's own address, registered with the provider as the redirect URI. */
function redirectUri(): string {
  return `${location.origin}/ui/`;
}

/** Sends the browser to the provider's login page. */
export async function begin(s: OidcSettings): Promise<void> {
  const d = await discovery(s.issuer);
  const verifier = random(32);
  const challenge = base64url(new Uint8Array(await crypto.subtle.digest('SHA-256', new TextEncoder().encode(verifier))));
  const state = random(16);
  const pending: Pending = { verifier, state, tokenEndpoint: d.token_endpoint, redirectUri: redirectUri(), clientId: s.clientId };
  sessionStorage.setItem(PENDING_KEY, JSON.stringify(pending));
  const q = new URLSearchParams({
    response_type: 'code',
    client_id: s.clientId,
    redirect_uri: pending.redirectUri,
    scope: s.scopes.join(' '),
    state,
    code_challenge: challenge,
    code_challenge_method: 'S256',
  });
  location.assign(`${d.authorization_endpoint}?${q}`);
}

/** On return from the provider: the ID token for the code in the address, or null when
 *  this load is not such a return. Throws with the provider's words when it refused. */
export async function finish(): Promise<string | null> {
  const q = new URLSearchParams(location.search);
  const code = q.get('code');
  const error = q.get('error');
  if (!code && !error) return null;
  const pending = JSON.parse(sessionStorage.getItem(PENDING_KEY) ?? 'null') as Pending | null;
  sessionStorage.removeItem(PENDING_KEY);
  // Out of the address bar and history either way.
  history.replaceState(null, '', `${location.pathname}#/`);
  if (error) throw new Error(`${error}: ${q.get('error_description') ?? 'the provider refused the sign-in'}`);
  if (!pending || q.get('state') !== pending.state) throw new Error('this sign-in was not started here (state mismatch)');
  const res = await fetch(pending.tokenEndpoint, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({
      grant_type: 'authorization_code',
      code: code ?? '',
      redirect_uri: pending.redirectUri,
      client_id: pending.clientId,
      code_verifier: pending.verifier,
    }),
  });
  const body = (await res.json().catch(() => ({}))) as { id_token?: string; error?: string; error_description?: string };
  if (!res.ok || !body.id_token) throw new Error(body.error_description ?? body.error ?? `the provider answered HTTP ${res.status}`);
  return body.id_token;
}
