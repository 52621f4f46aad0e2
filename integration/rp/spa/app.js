// The single-page app of integration/spa_test.go: a public client of palmgate
// with oidc-client-ts (PKCE S256, no secret). "/" starts the login; "/callback"
// completes it, calls userinfo across origins, renews with the refresh token
// (signinSilent uses it when the user holds one), then replays the rotated-out
// refresh token. Each outcome is a <p id=...> the test reads.
//
// With "flow": "silent" in /config.json (TestSPASilentRenewal), "/callback"
// instead renews with the refresh token when it holds one (the scope the config
// names decides), then in a hidden iframe with prompt=none (signinSilent's
// iframe path; "/silent" is its silent_redirect_uri), and shows a Sign out button:
// signoutRedirect (RP-initiated logout) back to "/signedout", which tries the
// iframe renewal again.
import { UserManager, WebStorageStateStore } from "oidc-client-ts";

const out = (id, text) => {
  const p = document.createElement("p");
  p.id = id;
  p.textContent = text;
  document.body.append(p);
};

try {
  const cfg = await (await fetch("/config.json")).json();
  const mgr = new UserManager({
    authority: cfg.authority,
    client_id: cfg.client_id,
    redirect_uri: location.origin + "/callback",
    silent_redirect_uri: location.origin + "/silent",
    post_logout_redirect_uri: location.origin + "/signedout",
    scope: cfg.scope || "openid offline_access",
    response_type: "code",
    loadUserInfo: false,
    automaticSilentRenew: false,
    silentRequestTimeoutInSeconds: 20, // a slow machine's iframe; an answer comes at once
    userStore: new WebStorageStateStore({ store: window.localStorage }),
  });
  if (location.pathname === "/silent") {
    await mgr.signinSilentCallback(); // in the hidden iframe: hands the answer to the app
  } else if (location.pathname === "/signedout") {
    out("afterLogout", JSON.stringify(await iframeRenewal(mgr, null)));
  } else if (location.pathname === "/callback" && cfg.flow === "silent") {
    const user = await mgr.signinCallback();
    out("signedin", JSON.stringify({ hasRefreshToken: !!user.refresh_token }));
    if (user.refresh_token) {
      const renewed = await mgr.signinSilent();
      out("refreshed", JSON.stringify({
        rotated: !!renewed.refresh_token && renewed.refresh_token !== user.refresh_token,
        newAccessToken: !!renewed.access_token && renewed.access_token !== user.access_token,
        sameSub: renewed.profile.sub === user.profile.sub,
      }));
    }
    out("iframe", JSON.stringify({ hadRefreshToken: !!user.refresh_token, ...(await iframeRenewal(mgr, user)) }));
    const signout = document.createElement("button");
    signout.id = "signout";
    signout.textContent = "Sign out";
    signout.onclick = () => mgr.signoutRedirect().catch((e) => out("error", String((e && e.message) || e)));
    document.body.append(signout);
  } else if (location.pathname === "/callback") {
    const user = await mgr.signinCallback();
    const r = await fetch(cfg.authority + "/userinfo", { headers: { Authorization: "Bearer " + user.access_token } });
    const info = await r.json();
    out("userinfo", JSON.stringify({ status: r.status, sub: info.sub, sameAsIDToken: info.sub === user.profile.sub }));
    const first = user.refresh_token;
    const renewed = await mgr.signinSilent();
    out("renewed", JSON.stringify({
      hadRefreshToken: !!first,
      rotated: !!renewed.refresh_token && renewed.refresh_token !== first,
      newAccessToken: !!renewed.access_token && renewed.access_token !== user.access_token,
      sameSub: renewed.profile.sub === user.profile.sub,
    }));
    const reuse = await fetch(cfg.authority + "/token", {
      method: "POST",
      headers: { "Content-Type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({ grant_type: "refresh_token", client_id: cfg.client_id, refresh_token: first }),
    });
    out("reuse", JSON.stringify({ status: reuse.status, error: (await reuse.json()).error }));
  } else {
    await mgr.signinRedirect();
  }
} catch (e) {
  out("error", String((e && e.message) || e));
}

// iframeRenewal renews in a hidden iframe with prompt=none (forced even when the
// app holds a refresh token) and says how it went: a new access token for the
// same subject as user's, or the authorization server's error.
async function iframeRenewal(mgr, user) {
  try {
    const renewed = await mgr.signinSilent({ forceIframeAuth: true });
    return {
      renewed: true,
      newAccessToken: !!renewed.access_token && (!user || renewed.access_token !== user.access_token),
      sameSub: !user || renewed.profile.sub === user.profile.sub,
    };
  } catch (e) {
    return { renewed: false, error: (e && (e.error || e.message)) || String(e) };
  }
}
