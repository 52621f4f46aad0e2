// The Auth.js relying party of palmgate's integration tests (integration/authjs_test.go):
// @auth/express with its stock OpenID Connect provider configuration, as its
// documentation shows it: issuer, client id and secret, type "oidc"; nothing else.
// ISSUER, AUTH_CLIENT_SECRET, AUTH_SECRET and PORT come from the environment. It prints
// its base URL on its first line; GET / shows the signed-in user (#rp-done) or a
// link to sign in (#rp-signin).
import express from "express"
import { ExpressAuth, getSession } from "@auth/express"

// docs/CLIENTS.md shows the block below word for word (TestClientsDocAuthJSSnippet).
// README:begin
const authConfig = {
  providers: [
    {
      id: "palmgate",
      name: "palmgate",
      type: "oidc",
      issuer: process.env.ISSUER, // https://id.example.com/oauth2
      clientId: "my-app",
      clientSecret: process.env.AUTH_CLIENT_SECRET,
    },
  ],
  trustHost: true,
}
// README:end

const app = express()
app.set("trust proxy", true)
app.use("/auth/*", ExpressAuth(authConfig))

const escape = (s) => String(s).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`)

app.get("/", async (req, res) => {
  const session = await getSession(req, authConfig)
  res.type("html")
  if (!session?.user) {
    res.send(`<!doctype html><title>app</title><a id="rp-signin" href="/auth/signin">Sign in</a>`)
    return
  }
  res.send(`<!doctype html><title>app</title><p id="rp-done">signed in as ${escape(session.user.name ?? "")}</p>` +
    `<pre id="rp-session">${escape(JSON.stringify(session))}</pre>`)
})

const port = Number(process.env.PORT || 0)
const server = app.listen(port, "127.0.0.1", () => {
  console.log(`http://127.0.0.1:${server.address().port}`)
})
