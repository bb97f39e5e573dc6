// The status page: one server-sent-events stream of snapshots, rendered with
// textContent only (adapter ids, users and details come from outside).
"use strict";

function el(tag, text, className) {
  const node = document.createElement(tag);
  if (text !== undefined && text !== null) node.textContent = String(text);
  if (className) node.className = className;
  return node;
}

function when(seconds) {
  return new Date(seconds * 1000).toLocaleTimeString();
}

function row(cells) {
  const tr = el("tr");
  for (const cell of cells) tr.appendChild(cell instanceof Node ? cell : el("td", cell));
  return tr;
}

function adapterRow(a) {
  const tr = row([
    el("td", a.id, "id"),
    el("td", a.role, "role role-" + a.role),
    el("td", a.term, "term"),
    el("td", a.sync, "sync sync-" + a.sync),
    el("td", a.health, "health"),
    el("td", a.lag, "lag"),
    el("td", a.rate, "rate"),
    el("td", a.next_msg_seq, "seq"),
    el("td", a.up ? a.age + " s ago" : "down", a.up ? "age" : "age down"),
    el("td", a.line, "line"),
  ]);
  tr.dataset.adapter = a.id;
  tr.dataset.role = a.role;
  return tr;
}

function channelBlock(c) {
  const block = el("div", null, "channel");
  block.dataset.channel = c.name;
  const title = el("h3", c.name);
  title.appendChild(el("span", " #" + (c.number === null ? "?" : c.number), "muted"));
  block.appendChild(title);
  const facts = el("p", null, "facts");
  const facts_list = [
    ["active", c.active || "none"],
    ["term", c.term],
    ["subscribers", c.subscribers],
    ["line rate", c.rate + " msg/s"],
  ];
  for (const [name, value] of facts_list) {
    const span = el("span", null, "fact fact-" + name.replace(" ", "-"));
    span.appendChild(el("b", name + " "));
    span.appendChild(el("span", value, "value"));
    facts.appendChild(span);
  }
  block.appendChild(facts);
  const table = el("table", null, "adapters");
  const head = row(["adapter", "role", "term", "sync", "health", "lag", "msg/s", "msg_seq", "report", "line"]
    .map((name) => el("th", name)));
  table.appendChild(el("thead")).appendChild(head);
  const body = table.appendChild(el("tbody"));
  for (const a of c.adapters) body.appendChild(adapterRow(a));
  block.appendChild(table);
  return block;
}

function render(snapshot) {
  const channels = document.getElementById("channels");
  channels.replaceChildren(...snapshot.channels.map(channelBlock));
  if (!snapshot.channels.length) channels.appendChild(el("p", "no channel yet", "muted"));
  const failovers = document.querySelector("#failovers tbody");
  failovers.replaceChildren(...snapshot.failovers.map((f) =>
    row([when(f.at), f.channel, f.from || "-", f.to, f.term])));
  const audit = document.querySelector("#audit tbody");
  audit.replaceChildren(...snapshot.audit.map((e) =>
    row([when(e.at), e.user, e.action, e.target, e.detail + (e.count > 1 ? " (x" + e.count + ")" : "")])));
  document.getElementById("updated").textContent = "updated " + when(snapshot.at);
  document.body.dataset.version = String((Number(document.body.dataset.version) || 0) + 1);
}

function connect() {
  const state = document.getElementById("connection");
  const source = new EventSource("/events");
  source.addEventListener("status", (event) => {
    state.textContent = "live";
    state.className = "connection live";
    render(JSON.parse(event.data));
  });
  source.onerror = () => {
    state.textContent = "reconnecting";
    state.className = "connection lost";
  };
}

document.addEventListener("DOMContentLoaded", connect);
