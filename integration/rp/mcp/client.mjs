// The official MCP TypeScript SDK client against an MCP server behind palmgate
// (integration/mcp_test.go drives it). Usage:
//   node client.mjs <mcp url> <redirect url> <client_id | "register" | "metadata:<https url>">
// With "register" the SDK registers itself (RFC 7591) at the registration_endpoint
// of palmgate's metadata; with "metadata:<url>" it offers that client ID metadata
// document's URL as its client_id (palmgate's metadata says it supports them);
// either way it prints `CLIENT <client_id>`.
// It connects; on the 401 the SDK discovers the resource and authorization server
// metadata and starts the authorization code flow with PKCE and `resource`: the
// authorization URL is printed as `AUTHORIZE <url>`, and the code the browser
// brought back is read from standard input. It then finishes the flow, lists the
// tools, calls whoami and prints `RESULT <json>`. Every HTTP request the SDK makes
// is printed as `FETCH <method> <status> <url>`, and the access token it got as
// `TOKEN <token>`, so that the test sees what happened.
import { createInterface } from 'node:readline';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { UnauthorizedError } from '@modelcontextprotocol/sdk/client/auth.js';

const [mcpURL, redirectURL, clientID] = process.argv.slice(2);
const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();

class Provider {
  #tokens; #verifier;
  #client = clientID === 'register' || clientID.startsWith('metadata:') ? undefined : { client_id: clientID };
  get clientMetadataUrl() { return clientID.startsWith('metadata:') ? clientID.slice('metadata:'.length) : undefined; }
  get redirectUrl() { return redirectURL; }
  get clientMetadata() {
    return { client_name: 'MCP test client', redirect_uris: [redirectURL],
      grant_types: ['authorization_code', 'refresh_token'], response_types: ['code'], token_endpoint_auth_method: 'none' };
  }
  clientInformation() { return this.#client; }
  saveClientInformation(info) { this.#client = info; console.log('CLIENT ' + info.client_id); }
  tokens() { return this.#tokens; }
  saveTokens(t) { this.#tokens = t; console.log('TOKEN ' + t.access_token); }
  redirectToAuthorization(u) { console.log('AUTHORIZE ' + u.href); }
  saveCodeVerifier(v) { this.#verifier = v; }
  codeVerifier() { return this.#verifier; }
}

const loggingFetch = async (input, init) => {
  const res = await fetch(input, init);
  const u = typeof input === 'string' ? input : (input.href ?? input.url);
  console.log(`FETCH ${init?.method ?? 'GET'} ${res.status} ${u}`);
  return res;
};

const provider = new Provider();
const transport = () => new StreamableHTTPClientTransport(new URL(mcpURL), { authProvider: provider, fetch: loggingFetch });
const client = new Client({ name: 'palmgate-mcp-test', version: '1.0.0' });
try {
  const first = transport();
  try {
    await client.connect(first);
    throw new Error('connected without a token');
  } catch (e) {
    if (!(e instanceof UnauthorizedError)) throw e;
  }
  const { value: code } = await lines.next();
  await first.finishAuth(code.trim());
  await client.connect(transport());
  const tools = await client.listTools();
  const result = await client.callTool({ name: 'whoami', arguments: {} });
  console.log('RESULT ' + JSON.stringify({ tools: tools.tools.map((t) => t.name), result }));
  await client.close();
  process.exit(0);
} catch (e) {
  console.log('ERROR ' + (e?.stack ?? e));
  process.exit(1);
}
