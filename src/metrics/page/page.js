// The live page: reads /api/run every two seconds and draws its series with uPlot, one chart per
// scalar against the global step, and lists the workers and the run's problems. The colours are
// fixed: the browser test (tests/metrics/live_page_test.cc) looks for the loss curve's.
"use strict";

const kSeries = [
  {name: "loss", colour: "#d62728"},
  {name: "accuracy", colour: "#2ca02c"},
  {name: "learning_rate", colour: "#1f77b4"},
  {name: "examples_per_sec", colour: "#9467bd"},
];
const kRefreshMs = 2000;
const charts = {};

function chartFor(series) {
  if (charts[series.name]) return charts[series.name];
  const box = document.getElementById("chart-" + series.name);
  const options = {
    width: box.clientWidth,
    height: box.clientHeight,
    legend: {show: false},
    cursor: {show: false},
    scales: {x: {time: false}},
    axes: [{label: "step"}, {size: 70}],  // room for "300,000"
    series: [{}, {stroke: series.colour, width: 2, points: {show: false}, spanGaps: true}],
  };
  charts[series.name] = new uPlot(options, [[], []], box);
  return charts[series.name];
}

function draw(run) {
  for (const series of kSeries) {
    const points = (run.series[series.name] || {points: []}).points;
    chartFor(series).setData([points.map((p) => p[0]), points.map((p) => p[2])]);
  }
}

function cell(row, text, className) {
  const td = row.insertCell();
  td.textContent = text;
  if (className) td.className = className;
}

function fixed(value, digits) {
  return typeof value === "number" ? value.toFixed(digits) : "";
}

function listWorkers(run) {
  const body = document.querySelector("#workers tbody");
  body.replaceChildren();
  for (const w of run.workers) {
    const row = body.insertRow();
    row.className = "worker " + w.state;
    row.dataset.worker = w.name;
    row.dataset.state = w.state;
    cell(row, w.name);
    cell(row, w.state, "state");
    cell(row, String(w.step));
    cell(row, fixed(w.step_ms, 2));
    cell(row, fixed(w.mean_step_ms, 2));
    cell(row, fixed(w.seconds_since_report, 1));
  }
}

function listProblems(run) {
  const list = document.getElementById("problems");
  list.replaceChildren();
  const add = (text, name) => {
    const item = document.createElement("li");
    item.textContent = text;
    if (name) item.dataset.worker = name;
    list.appendChild(item);
  };
  for (const s of run.stalled)
    add(`${s.name} is stalled: no step reported for ${s.seconds.toFixed(1)} s`, s.name);
  for (const s of run.stragglers) add(s.line, s.name);
  if (run.stragglers_dropped > 0) add(`and ${run.stragglers_dropped} more straggler lines`);
  if (!list.children.length) {
    add("none");
    list.firstChild.className = "none";
  }
}

function say(text) {
  document.getElementById("status").textContent = text;
}

async function refresh() {
  try {
    const response = await fetch("/api/run", {cache: "no-store"});
    if (!response.ok) throw new Error(`/api/run answered ${response.status}`);
    const run = await response.json();
    document.getElementById("task").textContent = run.task;
    draw(run);
    listWorkers(run);
    listProblems(run);
    const test = run.test_accuracy === null ? "" : `, test accuracy ${run.test_accuracy}`;
    say(`${run.finished ? "finished" : "training"}: global step ${run.step}${test}`);
    document.body.dataset.step = String(run.step);
  } catch (error) {
    say(`cannot read /api/run (${error.message}); the task may have ended`);
  }
}

refresh();
setInterval(refresh, kRefreshMs);
