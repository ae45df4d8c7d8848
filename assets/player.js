// The token player (app/player.py builds the gr.HTML and documents the data; styles: player.css).
// Gradio runs this once per component as its js_on_load, with `element` (the component's root),
// `props` (props.value: the lanes) and `watch`. Every lane plays on ONE clock: a token appears when
// the clock reaches its `time` (a record's measured elapsed seconds), scaled by slow motion.
// Playback starts when the player is on screen; Replay and the speed control never ask the server.
// Text goes in with textContent only (token text is data, never HTML).
// A value with `sync` (one lane tied to the Explainer's panels, app/player.py) keeps ONE timeline
// with them: it reports each iteration it shows (from 0) with trigger('select', {iteration, nonce})
// and the panels re-render that iteration; it comes to rest on `rest` when it ends; a value with
// `current` is shown at rest on that iteration at once; the page's 'specdec-seek' event (the
// timeline moved) and 'specdec-pause' event (Stop) move or pause it. Tokens after the iteration
// shown are dimmed, the iteration's own tokens outlined.

const root = element.querySelector('.rp') || element;
const SPEEDS = [[1, '1x (real time)'], [0.75, '0.75x'], [0.5, '0.5x'], [0.25, '0.25x']];
const KINDS = {accepted: 'accepted draft', correction: 'correction', bonus: 'bonus', target: 'target'};
// the words come with each value, in the page's language (player.py `player_words`); English if absent
function W(key, fallback, params) {
  const words = data && data.words;
  let text = words && typeof words[key] === 'string' ? words[key] : fallback;
  for (const [k, v] of Object.entries(params || {})) text = text.split('{' + k + '}').join(String(v));
  return text;
}
let speed = 1;
let data = null;   // the value being shown
let run = null;    // the animation: {lanes, end, t0, base, raf}
let pending = false;  // a new value waits for the player to be on screen
let onScreen = false;
let reported = -1;    // the iteration last reported to the panels (sync values)
let acked = -1;       // the last iteration the panels confirmed they show (the 'shown' prop)
let lastAck = -1;     // the iteration the panels confirmed last
let holdSince = 0;    // when the playback began waiting for the panels
const HOLD_MAX_MS = 4000;  // past this the playback goes on without them

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined && text !== null) e.textContent = text;
  return e;
}
function secs(x) { return (x < 0.1 ? x.toFixed(3) : x.toFixed(2)) + ' s'; }
function num(x, d) { return (typeof x === 'number' && isFinite(x)) ? x.toFixed(d) : '—'; }
function parse(v) {
  if (!v) return null;
  if (typeof v === 'string') { try { return JSON.parse(v); } catch (e) { return null; } }
  return v;
}

// ---- the frame: controls, legend, lanes, result --------------------------------------------
const bar = el('div', 'rp-controls');
const replay = el('button', 'rp-btn rp-replay', '↺ Replay');
replay.type = 'button';
const speedLabel = el('label', 'rp-speedlabel', 'Slow motion ');
const speedSel = el('select', 'rp-speed');
for (const [v, label] of SPEEDS) { const o = el('option', '', label); o.value = String(v); speedSel.appendChild(o); }
speedLabel.appendChild(speedSel);
const bigBtn = el('button', 'rp-btn rp-bigbtn', 'A+ Large text');
bigBtn.type = 'button';
bigBtn.setAttribute('aria-pressed', 'false');
const status = el('span', 'rp-status');
status.setAttribute('aria-live', 'polite');
bar.append(replay, speedLabel, bigBtn, status);
const head = el('div', 'rp-headline');
const legend = el('div', 'rp-legend');
const lanesBox = el('div', 'rp-lanes');
const result = el('p', 'rp-result');
result.setAttribute('aria-live', 'polite');
root.replaceChildren(head, bar, legend, lanesBox, result);

// ---- building one value ---------------------------------------------------------------------
function buildLane(lane, i) {
  const box = el('section', 'rp-lane');
  box.dataset.lane = String(i);
  box.dataset.count = '0';
  box.setAttribute('aria-label', W('lane', 'Lane {label}: {name}', {label: lane.label || i + 1, name: lane.name || lane.method || ''}));
  const top = el('header', 'rp-lanehead');
  top.append(el('span', 'rp-tag', lane.label || String(i + 1)), el('span', 'rp-name', lane.name || lane.method || ''));
  const flag = el('span', 'rp-flag');
  top.appendChild(flag);
  const track = el('div', 'rp-track');
  const fill = el('div', 'rp-fill');
  const finish = el('div', 'rp-finish');
  finish.title = W('finish', 'finish line');
  track.append(fill, finish);
  const figs = el('dl', 'rp-figs');
  const fig = {};
  for (const [key, label] of [['clock', W('fig.clock', 'clock')], ['tokens', W('fig.tokens', 'tokens')],
                              ['tps', W('fig.tps', 'tokens/s')], ['calls', W('fig.calls', 'target calls')],
                              ['tpc', W('fig.tpc', 'tokens/call')]]) {
    const cell = el('div', 'rp-fig');
    cell.dataset.fig = key;
    fig[key] = el('dd', '', '—');
    cell.append(el('dt', '', label), fig[key]);
    figs.appendChild(cell);
  }
  const chips = el('div', 'rp-chips chips');
  chips.setAttribute('role', 'log');
  chips.setAttribute('tabindex', '0');  // it scrolls: reachable by keyboard (axe: scrollable-region-focusable)
  box.append(top, track, figs, chips);
  const tokens = Array.isArray(lane.tokens) ? lane.tokens : [];
  const s = lane.summary || null;
  const last = tokens.length ? Number(tokens[tokens.length - 1].time) || 0 : 0;
  // a chosen pace ends with its last token; measured times end when the run did
  const end = data && data.paced ? last : Math.max(last, s && typeof s.seconds === 'number' ? s.seconds : 0);
  return {lane, box, flag, fill, fig, chips, tokens, summary: s, end, i: 0, calls: 0, done: false, shown: {}};
}

function show(data_) {
  data = data_;
  stop();
  lanesBox.replaceChildren();
  result.textContent = '';
  result.className = 'rp-result';
  legend.replaceChildren();
  head.replaceChildren();
  const lanes = data && Array.isArray(data.lanes) ? data.lanes : [];
  root.dataset.lanes = String(lanes.length);
  bar.hidden = !lanes.length;
  if (!lanes.length) {
    root.dataset.state = 'empty';
    head.appendChild(el('p', 'rp-empty', (data && data.message) || W('empty', 'Nothing to play yet.')));
    replay.disabled = true;
    return;
  }
  replay.disabled = false;
  replay.textContent = W('replay', '↺ Replay');
  speedLabel.firstChild.textContent = W('slow', 'Slow motion ');
  bigBtn.textContent = W('large', 'A+ Large text');
  speedSel.options[0].textContent = data.paced ? W('speed.paced', '1x (the chosen pace)') : W('speed.real', SPEEDS[0][1]);
  if (data.title) head.appendChild(el('h3', 'rp-title', data.title));
  if (data.prompt) {
    const d = el('details', 'rp-prompt');
    d.append(el('summary', '', W('prompt', 'Prompt')), el('pre', '', data.prompt));
    head.appendChild(d);
  }
  const kinds = new Set();
  let lookup = false, corpus = false;
  for (const lane of lanes) for (const t of lane.tokens || []) {
    kinds.add(t.kind); lookup = lookup || !!t.lookup; corpus = corpus || !!t.corpus;
  }
  for (const k of Object.keys(KINDS)) if (kinds.has(k)) legend.appendChild(el('span', 'chip chip-' + k, W('kind.' + k, KINDS[k])));
  if (lookup) legend.appendChild(el('span', 'chip chip-accepted from-lookup', W('lookup', 'copied from the context')));
  if (corpus) legend.appendChild(el('span', 'chip chip-accepted from-corpus', W('corpus', 'copied from earlier answers')));
  run = {lanes: lanes.map(buildLane), raf: 0, t0: 0, base: 0, end: 0};
  run.end = Math.max(0, ...run.lanes.map(l => l.end));
  // finish order, from the measured times (ties share a place)
  for (const l of run.lanes) l.place = 1 + run.lanes.filter(o => o.end < l.end).length;
  for (const l of run.lanes) lanesBox.appendChild(l.box);
  root.dataset.state = 'ready';
  reported = data.sync ? 0 : -1;  // the server renders the panels at the first (or the current) iteration
  acked = reported;
  lastAck = data.sync && data.current !== null && data.current !== undefined ? Number(data.current) : reported;
  if (data.sync && data.current !== null && data.current !== undefined) {
    pending = false;
    showAt(Number(data.current), '');
    return;
  }
  pending = true;
  if (onScreen) start();
  else {
    status.textContent = W('ready', 'Ready: plays when on screen.');
    // opened while its tab is shown (a phone: the player sits below the controls): bring it into view
    if (root.getClientRects().length) root.scrollIntoView({behavior: 'smooth', block: 'start'});
  }
}

// ---- playing --------------------------------------------------------------------------------
function stop() { if (run && run.raf) cancelAnimationFrame(run.raf); if (run) run.raf = 0; }

function reset() {
  for (const l of run.lanes) {
    l.i = 0; l.calls = 0; l.done = false; l.shown = {};
    l.chips.replaceChildren();
    l.flag.textContent = '';
    l.box.classList.remove('done', 'winner');
    l.box.dataset.count = '0';
    delete l.box.dataset.place;
    l.fill.style.transform = 'scaleX(0)';
  }
  result.textContent = '';
  result.className = 'rp-result';
  root.removeAttribute('data-current');
}

function start() {
  if (!run) return;
  pending = false;
  stop();
  reset();
  holdSince = 0;
  if (data && data.sync && reported !== 0) acked = -1;  // Replay: the panels go back to the first iteration
  run.base = 0;
  run.t0 = performance.now();
  root.dataset.state = 'playing';
  status.textContent = playingText();
  run.raf = requestAnimationFrame(frame);
}

// a race plays measured times; a paced value (data.paced) plays a chosen pace, so its clock is not a
// measurement: its tokens/s stays blank until the lane ends and shows the run's measured figure
function playingText() {
  const paced = !!(data && data.paced);
  if (speed === 1) return paced ? W('playing_paced', 'Playing at the chosen pace…') : W('racing', 'Racing in real time…');
  return paced ? W('playing_slow', 'Playing in slow motion ({speed}x)…', {speed}) : W('racing_slow', 'Racing in slow motion ({speed}x)…', {speed});
}

function clockAt(now) { return run.base + (now - run.t0) / 1000 * speed; }

function chip(tok) {
  const kind = KINDS[tok.kind] ? tok.kind : 'target';
  const s = el('span', 'chip chip-' + kind + (tok.lookup ? ' from-lookup' : '') + (tok.corpus ? ' from-corpus' : ''));
  const text = String(tok.text === undefined ? '' : tok.text);
  s.textContent = text === '' ? '∅' : text.replace(/\n/g, '↵').replace(/\t/g, '⇥');
  return s;
}

function set(l, key, text) {  // touch the DOM only when a figure changes
  if (l.shown[key] !== text) { l.shown[key] = text; l.fig[key].textContent = text; }
}

function advance(l, clock) {
  const frag = document.createDocumentFragment();
  while (l.i < l.tokens.length && Number(l.tokens[l.i].time) <= clock) {
    const tok = l.tokens[l.i++];
    frag.appendChild(chip(tok));
    if (String(tok.text).includes('\n')) frag.appendChild(el('br'));
    if (typeof tok.calls === 'number') l.calls = tok.calls;
  }
  if (frag.childNodes.length) {
    l.chips.appendChild(frag);
    l.chips.scrollTop = l.chips.scrollHeight;
    l.box.dataset.count = String(l.i);
    l.fill.style.transform = 'scaleX(' + (l.tokens.length ? l.i / l.tokens.length : 1) + ')';
  }
  const t = Math.min(clock, l.end);
  const finished = clock >= l.end;
  const s = l.summary;
  set(l, 'clock', secs(finished && s ? s.seconds : t));
  set(l, 'tokens', String(l.i));
  const paced = !!(data && data.paced);
  set(l, 'tps', finished && s ? num(s.tokens_per_second, 1) : (t > 0 && !paced ? num(l.i / t, 1) : '—'));
  set(l, 'calls', finished && s ? String(s.target_calls) : (l.calls ? String(l.calls) : '—'));
  set(l, 'tpc', finished && s ? num(s.tokens_per_call, 2) : (l.calls ? num(l.i / l.calls, 2) : '—'));
  if (finished && !l.done) {
    l.done = true;
    l.box.classList.add('done');
    l.box.dataset.place = String(l.place);
    l.fill.style.transform = 'scaleX(1)';
    const several = run.lanes.length > 1;
    const place = l.place === 1 ? W('place1', 'first to finish') : l.place === 2 ? W('place2', '2nd')
      : l.place === 3 ? W('place3', '3rd') : W('placen', '{n}th', {n: l.place});
    l.flag.textContent = (several ? place : W('done', 'done')) + ', ' + secs(l.end);
    if (several && l.place === 1) l.box.classList.add('winner');
  }
}

function frame(now) {
  if (!run) return;
  let clock = clockAt(now);
  if (data && data.sync) clock = held(now, clock);
  for (const l of run.lanes) advance(l, clock);
  if (data && data.sync) {
    const l = run.lanes[0];
    if (l && l.i > 0) {
      const it = Number(l.tokens[l.i - 1].it);
      if (clock < run.end) status.textContent = playingText() + ' ' + iterText(it);
    }
  }
  if (clock >= run.end) {
    if (data && data.sync) {  // come to rest once the panels show the rest iteration too
      const rest = restOf();
      if (lastAck !== rest) {
        if (reported !== rest) { report(rest); holdSince = now; }
        if (now - holdSince <= HOLD_MAX_MS) { run.raf = requestAnimationFrame(frame); return; }
      }
      run.raf = 0;
      showAt(rest, W('finished', 'Finished. '));
      return;
    }
    run.raf = 0;
    root.dataset.state = 'done';
    status.textContent = speed === 1 ? W('finished_replay', 'Finished. Replay to watch again, or pick a slow motion.')
      : W('finished_replay_slow', 'Finished. Replay to watch again.');
    if (data && data.result) {
      result.textContent = data.result;
      result.className = 'rp-result ' + (data.verdict || '');
    }
    return;
  }
  run.raf = requestAnimationFrame(frame);
}

// ---- one timeline with the panels (sync values) ---------------------------------------------
function iterations() {
  const l = run && run.lanes[0];
  if (!l) return 0;
  if (typeof l.lane.iterations === 'number') return l.lane.iterations;
  return l.tokens.length ? Number(l.tokens[l.tokens.length - 1].it) + 1 : 0;
}
function restOf() {
  const n = iterations();
  const r = Number(data && data.rest);
  return isFinite(r) && r >= 0 && r < n ? r : n - 1;
}
function iterText(i) {
  return W('iteration', 'Iteration {i} of {n}.', {i: i + 1, n: iterations()});
}
function report(i) {
  reported = i;
  if (typeof trigger === 'function') trigger('select', {iteration: i, nonce: data.nonce});
}

// The playback never runs ahead of the panels: when the clock reaches an iteration, the player asks
// the panels for it and holds the clock until they confirm (the server answers each report with the
// 'shown' prop), for at most HOLD_MAX_MS; only then do its tokens appear. So player and panels show
// the same iteration even when rendering is slower than the chosen pace (the pace gives way).
function held(now, clock) {
  const l = run.lanes[0];
  const next = l && l.tokens[l.i];
  if (!next || clock < Number(next.time)) { holdSince = 0; return clock; }
  const it = Number(next.it);
  if (it <= acked) { holdSince = 0; return clock; }
  if (reported !== it) report(it);  // the panels render iteration it first; its tokens appear once they have
  if (!holdSince) holdSince = now;
  if (now - holdSince > HOLD_MAX_MS) { acked = it; holdSince = 0; return clock; }
  const at = Math.max(0, Number(next.time) - 1e-6);
  run.base = at;
  run.t0 = now;
  return at;
}

// the run as it stands at iteration i: its tokens so far, the later ones dimmed, i's own outlined
function showAt(i, prefix) {
  if (!run) return;
  stop();
  const n = iterations();
  i = Math.max(0, Math.min(i, n - 1));
  const atEnd = i === n - 1;
  for (const l of run.lanes) {
    l.chips.replaceChildren();
    const frag = document.createDocumentFragment();
    let shown = 0, calls = 0, t = 0;
    for (const tok of l.tokens) {
      const it = Number(tok.it);
      const c = chip(tok);
      if (it > i) c.classList.add('rp-later');
      else { shown++; if (typeof tok.calls === 'number') calls = tok.calls; t = Number(tok.time) || t; }
      if (it === i) c.classList.add('rp-cur');
      frag.appendChild(c);
      if (String(tok.text).includes('\n')) frag.appendChild(el('br'));
    }
    l.chips.appendChild(frag);
    l.i = shown; l.calls = calls; l.done = atEnd;
    l.box.dataset.count = String(shown);
    l.box.classList.toggle('done', atEnd);
    l.fill.style.transform = 'scaleX(' + (l.tokens.length ? shown / l.tokens.length : 1) + ')';
    const s = l.summary;
    const whole = atEnd && s;
    set(l, 'clock', secs(whole ? s.seconds : t));
    set(l, 'tokens', String(shown));
    set(l, 'tps', whole ? num(s.tokens_per_second, 1) : (t > 0 && !data.paced ? num(shown / t, 1) : '—'));
    set(l, 'calls', calls ? String(calls) : '—');
    set(l, 'tpc', calls ? num(shown / calls, 2) : '—');
    l.flag.textContent = atEnd ? 'done, ' + secs(l.end) : '';
    const cur = l.chips.querySelector('.rp-cur');
    if (cur && l.chips.scrollHeight > l.chips.clientHeight) l.chips.scrollTop = Math.max(0, cur.offsetTop - 40);
  }
  root.dataset.state = 'done';
  root.dataset.current = String(i);
  const rest = restOf();
  let words = iterText(i);
  if (i === rest && i < n - 1) words += ' The last iteration with a draft; the dimmed tokens come after it.';
  status.textContent = prefix + words + ' The panels below show the same iteration.';
  if (data && data.result && (prefix || i >= rest)) {
    result.textContent = data.result;
    result.className = 'rp-result ' + (data.verdict || '');
  } else {
    result.textContent = '';
  }
}

document.addEventListener('specdec-seek', (e) => {
  if (!run || !data || !data.sync || !e.detail || e.detail.player !== data.sync) return;
  pending = false;
  const i = Number(e.detail.iteration);
  if (!isFinite(i)) return;
  reported = acked = lastAck = i;  // the timeline's own event renders the panels there
  showAt(i, W('chosen', 'Chosen on the timeline: '));
});
document.addEventListener('specdec-pause', (e) => {
  if (!run || !data || !data.sync || !e.detail || e.detail.player !== data.sync || !run.raf) return;
  const l = run.lanes[0];
  const it = l && l.i > 0 ? Number(l.tokens[l.i - 1].it) : 0;
  showAt(it, W('paused', 'Paused. '));
  if (it !== reported) report(it);
});

// ---- controls -------------------------------------------------------------------------------
replay.addEventListener('click', () => start());
speedSel.addEventListener('change', () => {
  const next = Number(speedSel.value) || 1;
  if (run && run.raf) {  // keep the clock where it is, change its rate from now on
    const now = performance.now();
    run.base = clockAt(now);
    run.t0 = now;
  }
  speed = next;
  if (run && run.raf) status.textContent = playingText();
});
bigBtn.addEventListener('click', () => {
  const big = root.classList.toggle('big');
  bigBtn.setAttribute('aria-pressed', big ? 'true' : 'false');
});

// ---- when to play ---------------------------------------------------------------------------
if ('IntersectionObserver' in window) {
  new IntersectionObserver(entries => {
    onScreen = entries.some(e => e.isIntersecting);
    if (onScreen && pending) start();
  }).observe(root);
} else {
  onScreen = true;
}

// the panels confirm the iteration they show (handlers.follow_player)
watch('shown', () => {
  const s = props.shown;
  if (s && data && s.nonce === data.nonce && typeof s.iteration === 'number') {
    acked = Math.max(acked, s.iteration);
    lastAck = s.iteration;
  }
});

// Gradio may hand the same value over twice (a generator's last update, then its completion): a
// value with the nonce already shown is not a new run and must not restart the playback
watch('value', () => {
  const next = parse(props.value);
  if (next && data && next.nonce !== undefined && next.nonce === data.nonce) return;
  show(next);
});
show(parse(props.value));
