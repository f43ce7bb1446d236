// The TypeScript MCP SDK's client (StreamableHTTPClientTransport, a
// handshake-era session) against the hub's MCP gateway. Usage:
//
//   node mcp_gateway_client.cjs URL TOKEN SLEEP_ARG
//
// It connects with the token as a bearer token (and once without it),
// lists the tools and resources, calls sandbox__sandbox_execute_bash, a
// tool that does not exist, and a sleep it cancels after 300 ms, and
// prints one JSON object with what the SDK returned for the Go test
// (mcp_gateway_test.go) to assert. The SDK is the one pinned in
// test/peers.
'use strict';
const path = require('path');
const { createRequire } = require('module');

const peers = createRequire(path.join(__dirname, '..', '..', '..', 'peers', 'package.json'));
const { Client } = peers('@modelcontextprotocol/sdk/client/index.js');
const { StreamableHTTPClientTransport } = peers('@modelcontextprotocol/sdk/client/streamableHttp.js');

const [url, token, sleepArg] = process.argv.slice(2);

async function connect(key) {
  const headers = key ? { Authorization: `Bearer ${key}` } : {};
  const transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } });
  const client = new Client({ name: 'a2c-gateway-interop', version: '1.0.0' });
  await client.connect(transport);
  return { client, transport };
}

async function caught(f) {
  try {
    await f();
    return { thrown: false };
  } catch (e) {
    return { thrown: true, class: e.constructor.name, code: e.code, message: e.message };
  }
}

(async () => {
  const out = {};
  out.noToken = await caught(() => connect(''));
  const { client, transport } = await connect(token);
  out.protocolVersion = transport.protocolVersion;
  out.hasSession = Boolean(transport.sessionId);
  out.serverInfo = client.getServerVersion();
  out.capabilities = client.getServerCapabilities();
  const tools = await client.listTools();
  out.tools = tools.tools.map((t) => ({ name: t.name, computer: (t._meta || {}).a2c_computer, schemaType: t.inputSchema.type }));
  out.bash = await client.callTool({ name: 'sandbox__sandbox_execute_bash', arguments: { cmd: 'echo through the gateway' } });
  out.unknownTool = await caught(() => client.callTool({ name: 'nobody__nothing', arguments: {} }));
  const resources = await client.listResources();
  out.resources = resources.resources.map((r) => r.uri);
  const abort = new AbortController();
  setTimeout(() => abort.abort(), 300);
  out.cancelled = await caught(() => client.callTool({ name: 'sandbox__sandbox_execute_bash', arguments: { cmd: `sleep ${sleepArg}` } }, undefined, { signal: abort.signal }));
  await transport.terminateSession();
  await client.close();
  process.stdout.write(JSON.stringify(out));
})().catch((e) => {
  process.stderr.write(String(e && e.stack || e));
  process.exit(1);
});
