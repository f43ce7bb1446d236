// The TypeScript MCP SDK's client (StreamableHTTPClientTransport) against
// aiod's POST /mcp. Usage:
//
//   node mcp_client.cjs URL WORKSPACE [API_KEY]
//
// It initializes, lists the tools, calls sandbox_execute_bash and the error
// cases, and prints one JSON object with what the SDK returned (results as
// the SDK parsed them, errors as class, code and message) for the Go test
// (mcp_ts_test.go) to assert exactly. With API_KEY it sends the key as a
// bearer token and also connects without a key and with a wrong one.
// The SDK is the one pinned in test/peers.
'use strict';
const path = require('path');
const { createRequire } = require('module');

const peers = createRequire(path.join(__dirname, '..', '..', '..', 'peers', 'package.json'));
const { Client } = peers('@modelcontextprotocol/sdk/client/index.js');
const { StreamableHTTPClientTransport } = peers('@modelcontextprotocol/sdk/client/streamableHttp.js');
const { LATEST_PROTOCOL_VERSION } = peers('@modelcontextprotocol/sdk/types.js');

const [url, workspace, key] = process.argv.slice(2);

async function connect(apiKey) {
  const headers = apiKey ? { Authorization: `Bearer ${apiKey}` } : {};
  const transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } });
  const client = new Client({ name: 'a2c-interop', version: '1.0.0' });
  await client.connect(transport);
  return { client, transport };
}

// caught runs f and returns what it threw, as the SDK shaped it.
async function caught(f) {
  try {
    await f();
    return { thrown: false };
  } catch (e) {
    return { thrown: true, class: e.constructor.name, code: e.code, message: e.message };
  }
}

// result keeps what a client would read from a CallToolResult.
function result(r) {
  return { content: r.content, isError: r.isError === true };
}

async function main() {
  const out = { sdkLatestProtocol: LATEST_PROTOCOL_VERSION };
  const { client, transport } = await connect(key);
  out.initialize = {
    serverInfo: client.getServerVersion(),
    capabilities: client.getServerCapabilities(),
    protocolVersion: transport.protocolVersion,
    hasSession: typeof transport.sessionId === 'string' && transport.sessionId.length > 0,
  };
  out.ping = await client.ping();
  const listed = await client.listTools();
  out.tools = listed.tools.map((t) => ({
    name: t.name,
    described: typeof t.description === 'string' && t.description.length > 0,
    schemaType: t.inputSchema && t.inputSchema.type,
  }));
  out.nextCursor = listed.nextCursor ?? null;
  out.bash = result(await client.callTool({ name: 'sandbox_execute_bash', arguments: { cmd: 'echo hi' } }));
  out.unknownTool = await caught(() => client.callTool({ name: 'no_such_tool', arguments: {} }));
  out.noCmd = result(await client.callTool({ name: 'sandbox_execute_bash', arguments: {} }));
  // capabilities /mcp does not declare: the default client sends them anyway
  out.prompts = await caught(() => client.listPrompts());
  out.resources = await caught(() => client.listResources());
  out.setLevel = await caught(() => client.setLoggingLevel('debug'));
  out.missingFile = result(await client.callTool({
    name: 'sandbox_file_operations',
    arguments: { action: 'read', path: path.join(workspace, 'missing.txt') },
  }));
  out.terminate = await caught(() => transport.terminateSession());
  await client.close();
  if (key) {
    out.noKey = await caught(() => connect(''));
    out.wrongKey = await caught(() => connect(key + 'x'));
  }
  process.stdout.write(JSON.stringify(out) + '\n');
}

main().then(
  () => process.exit(0),
  (e) => {
    process.stderr.write(`mcp_client: ${e && e.stack ? e.stack : e}\n`);
    process.exit(1);
  },
);
