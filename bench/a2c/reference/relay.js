// Reference relay for the benchmark: the same A2C-SMCP routing as a2c
// server (offices, join/leave, client:* relay with per-call deadlines,
// notify:* broadcasts, version gate), written with Node's official
// socket.io server. It is a yardstick, not a product.
//
//   node relay.js [--port N] [--path /socket.io/]
// prints "listening 127.0.0.1:PORT" on stdout when ready.
"use strict";
const http = require("http");
const { Server } = require("socket.io");

const args = process.argv.slice(2);
const opt = (name, def) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : def;
};
const port = Number(opt("--port", "0"));
const path = opt("--path", "/socket.io/");

const httpServer = http.createServer((req, res) => {
  res.writeHead(404);
  res.end();
});
const io = new Server(httpServer, {
  path,
  maxHttpBufferSize: 1 << 20,
  allowRequest: (req, cb) => {
    const v = new URL(req.url, "http://x").searchParams.get("a2c_version");
    cb(null, v !== null && v.startsWith("0.4."));
  },
});

const offices = new Map(); // office_id -> {agent: socket|null, computers: Map(name -> socket)}
const CLIENT = ["client:tool_call", "client:get_tools", "client:get_config", "client:get_desktop",
  "client:get_resources", "client:get_skills", "client:get_skill", "client:get_blob", "client:put_blob"];
const UPDATES = { "server:update_config": "notify:update_config", "server:update_tool_list": "notify:update_tool_list",
  "server:update_desktop": "notify:update_desktop", "server:update_skills": "notify:update_skills" };

function leave(socket) {
  const m = socket.data;
  if (!m.office) return;
  const o = offices.get(m.office);
  const note = { office_id: m.office, [m.role]: m.name };
  socket.to(m.office).emit("notify:leave_office", note);
  socket.leave(m.office);
  if (m.role === "agent") o.agent = null; else o.computers.delete(m.name);
  if (!o.agent && o.computers.size === 0) offices.delete(m.office);
  m.office = null;
}

const nsp = io.of("/smcp");
nsp.on("connection", (socket) => {
  socket.data = { office: null, role: null, name: null };
  socket.on("server:join_office", (req, ack) => {
    const m = socket.data;
    if (!req || (req.role !== "agent" && req.role !== "computer") || typeof req.name !== "string" || typeof req.office_id !== "string") {
      return ack && ack(false, "invalid payload");
    }
    let o = offices.get(req.office_id);
    if (o && req.role === "agent" && o.agent && o.agent !== socket) return ack && ack(false, "Room already has an agent");
    if (o && req.role === "computer" && o.computers.has(req.name) && o.computers.get(req.name) !== socket) return ack && ack(false, "Computer name already in use in this office");
    if (m.office) leave(socket);
    o = offices.get(req.office_id);
    if (!o) { o = { agent: null, computers: new Map() }; offices.set(req.office_id, o); }
    Object.assign(m, { office: req.office_id, role: req.role, name: req.name });
    if (req.role === "agent") o.agent = socket; else o.computers.set(req.name, socket);
    socket.join(req.office_id);
    ack && ack(true, null);
    socket.to(req.office_id).emit("notify:enter_office", { office_id: req.office_id, [req.role]: req.name });
  });
  socket.on("server:leave_office", (req, ack) => { leave(socket); ack && ack(true, null); });
  for (const ev of CLIENT) {
    socket.on(ev, (req, ack) => {
      const m = socket.data;
      if (!m.office) return ack && ack({ code: 4103, message: "Not in an office" });
      const target = offices.get(m.office).computers.get(req && req.computer);
      if (!target) return ack && ack({ code: 404, message: "Computer not found" });
      const ms = ev === "client:tool_call" ? (Number(req.timeout) || 60) * 1000 + 5000 : 30000;
      target.timeout(ms).emit(ev, req, (err, res) => {
        if (!ack) return;
        if (err) return ack(ev === "client:tool_call" ? { content: [], isError: true, meta: { a2c_timeout: true } } : { code: 408, message: "timeout" });
        ack(res);
      });
    });
  }
  for (const [ev, note] of Object.entries(UPDATES)) {
    socket.on(ev, (req, ack) => {
      if (socket.data.office) socket.to(socket.data.office).emit(note, { computer: socket.data.name });
      ack && ack();
    });
  }
  socket.on("server:tool_call_cancel", (req, ack) => {
    if (socket.data.office) socket.to(socket.data.office).emit("notify:tool_call_cancel", req);
    ack && ack();
  });
  socket.on("server:list_room", (req, ack) => {
    const m = socket.data;
    if (!m.office) return ack && ack({ code: 4103, message: "Not in an office" });
    const o = offices.get(m.office);
    const sessions = [];
    if (o.agent) sessions.push({ sid: o.agent.id, name: o.agent.data.name, role: "agent", office_id: m.office });
    for (const [name, s] of o.computers) sessions.push({ sid: s.id, name, role: "computer", office_id: m.office });
    ack && ack({ sessions, req_id: req && req.req_id });
  });
  socket.on("disconnect", () => leave(socket));
});

httpServer.listen(port, "127.0.0.1", () => {
  console.log(`listening 127.0.0.1:${httpServer.address().port}`);
});
const stop = () => { io.close(); httpServer.close(() => process.exit(0)); setTimeout(() => process.exit(0), 2000).unref(); };
process.on("SIGTERM", stop);
process.on("SIGINT", stop);
