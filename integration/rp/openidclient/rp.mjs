// The Node relying party of palmgate's integration tests (integration/rp_test.go):
// openid-client v6 behind a small HTTP server on 127.0.0.1, driven by the Go test
// through a headless Chromium. The part between the README markers is the Node
// snippet of README.md, word for word (TestReadmeSnippets checks it).
//
// Environment: ISSUER (palmgate's /oauth2 issuer), MY_APP_SECRET (client my-app's
// secret). It prints its base URL on the first line of stdout, then serves:
//   /login            the authorization redirect
//   /auth/callback    the code exchange (the page says "signed in as <sub>")
//   /refresh          refreshTokenGrant, answers the new tokens as JSON
//   /userinfo         fetchUserInfo with the current access token, as JSON
//   /tokens           the current tokens as JSON
//   /logout           the redirect to palmgate's end_session_endpoint
//   /logged-out       where palmgate sends the browser back (checks state)
import http from 'node:http';

const server = http.createServer();
await new Promise((resolve) => server.listen(Number(process.env.PORT || 0), '127.0.0.1', resolve));
const base = `http://127.0.0.1:${server.address().port}`;
const issuer = new URL(process.env.ISSUER);
const redirect_uri = `${base}/auth/callback`;
const post_logout_redirect_uri = `${base}/logged-out`;
const discoveryOptions = issuer.protocol === 'http:' ? { execute: [client.allowInsecureRequests] } : undefined;

// README:begin
import * as client from 'openid-client';

const config = await client.discovery(issuer, 'my-app', process.env.MY_APP_SECRET, undefined, discoveryOptions);

// login: keep code_verifier, state and nonce in the user's session, redirect to the URL
async function login(session) {
  session.code_verifier = client.randomPKCECodeVerifier();
  session.state = client.randomState();
  session.nonce = client.randomNonce();
  return client.buildAuthorizationUrl(config, {
    redirect_uri, scope: 'openid offline_access', state: session.state, nonce: session.nonce,
    code_challenge: await client.calculatePKCECodeChallenge(session.code_verifier), code_challenge_method: 'S256',
  });
}

// callback: currentUrl is the whole URL the browser came back to (code, state, iss)
async function callback(session, currentUrl) {
  session.tokens = await client.authorizationCodeGrant(config, currentUrl, {
    pkceCodeVerifier: session.code_verifier, expectedState: session.state, expectedNonce: session.nonce,
  });
  session.sub = session.tokens.claims().sub; // the user's pairwise id
}

async function refresh(session) {
  session.tokens = await client.refreshTokenGrant(config, session.tokens.refresh_token);
}

async function userinfo(session) {
  return client.fetchUserInfo(config, session.tokens.access_token, session.sub);
}

// logout: redirect to the URL; palmgate ends this login and comes back with state
function logout(session) {
  session.state = client.randomState();
  return client.buildEndSessionUrl(config, {
    id_token_hint: session.tokens.id_token, post_logout_redirect_uri, state: session.state,
  });
}
// README:end

// One session: the test drives one browser.
const session = {};
const json = (res, status, body) => {
  res.writeHead(status, { 'Content-Type': 'application/json' });
  res.end(JSON.stringify(body));
};
server.on('request', async (req, res) => {
  const url = new URL(req.url, base);
  try {
    switch (url.pathname) {
      case '/login':
        res.writeHead(302, { Location: (await login(session)).href });
        return res.end();
      case '/auth/callback':
        await callback(session, url);
        res.writeHead(200, { 'Content-Type': 'text/html' });
        return res.end(`<!doctype html><title>RP</title><p id="rp-done">signed in as ${session.sub}</p>`);
      case '/refresh':
        await refresh(session);
        return json(res, 200, session.tokens);
      case '/userinfo':
        return json(res, 200, await userinfo(session));
      case '/tokens':
        return json(res, 200, { ...session.tokens, sub: session.sub });
      case '/logout':
        res.writeHead(302, { Location: logout(session).href });
        return res.end();
      case '/logged-out': {
        const ok = url.searchParams.get('state') === session.state;
        res.writeHead(ok ? 200 : 400, { 'Content-Type': 'text/html' });
        return res.end(ok ? '<!doctype html><title>RP</title><p id="rp-out">signed out</p>' : 'state mismatch');
      }
      default:
        return json(res, 404, { error: 'not found' });
    }
  } catch (err) {
    console.error(err);
    return json(res, 500, { error: String(err && err.message || err), code: err && err.code, cause: String(err && err.cause && (err.cause.error || err.cause.message) || '') });
  }
});
console.log(base);
