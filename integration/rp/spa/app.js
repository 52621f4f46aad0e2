// The single-page app of integration/spa_test.go: a public client of palmgate
// with oidc-client-ts (PKCE S256, no secret). "/" starts the login; "/callback"
// completes it, calls userinfo across origins, renews with the refresh token
// (signinSilent uses it when the user holds one), then replays the rotated-out
// refresh token. Each outcome is a <p id=...> the test reads.
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
    scope: "openid offline_access",
    response_type: "code",
    loadUserInfo: false,
    automaticSilentRenew: false,
    userStore: new WebStorageStateStore({ store: window.localStorage }),
  });
  if (location.pathname === "/callback") {
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
