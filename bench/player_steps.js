// Times a `dep run --replay` page's own script under Node.js, as a browser would run it but
// without drawing: loading its data, then moves of its slider (the first step, the end, one step
// back, a jump to the middle, ten steps forward), each timed until its markup is made.
//
//   node bench/player_steps.js PAGE.html
//
// The page's data block and script are taken from the page; the DOM is a stub holding what the
// script sets (the same stub as the views crate's `player_script_draws_what_rust_draws` test).

const fs = require('fs');

const page = fs.readFileSync(process.argv[2], 'utf8');
const between = (open, close) => {
  const start = page.indexOf(open) + open.length;
  return page.slice(start, page.indexOf(close, start));
};
const data = between('<script type="application/json" id="dep-data">', '</script>');
const script = between('<script>', '</script>');
const slider = page.match(/id="dep-slider" type="range" min="(\d+)" max="(\d+)"/);
const [min, max] = [+slider[1], +slider[2]];

const els = {};
const el = (id) => els[id] || (els[id] = {value: '0', textContent: '', innerHTML: '', listeners: {},
  addEventListener(type, f) { this.listeners[type] = f; }});
el('dep-data').textContent = data;
global.document = {getElementById: el, addEventListener() {}};

const time = (what, f) => {
  const t0 = process.hrtime.bigint();
  f();
  const ms = Number(process.hrtime.bigint() - t0) / 1e6;
  console.log(`${what.padEnd(26)} ${ms.toFixed(1).padStart(9)} ms  ${el('dep-step').textContent.slice(0, 90)}`);
};
const move = (n) => { el('dep-slider').value = String(n); el('dep-slider').listeners.input(); };

console.log(`page ${(page.length / 1e6).toFixed(1)} MB, slider ${min}..${max}`);
time('loading', () => eval(script));
time('the first step', () => move(min));
time('the end', () => move(max));
time('one step back', () => move(max - 1));
time('the middle', () => move(Math.floor((min + max) / 2)));
time('ten steps forward', () => { for (let i = 1; i <= 10; i++) move(Math.floor((min + max) / 2) + i); });
console.log(`last redraw ${(el('dep-frame').innerHTML.length / 1e3).toFixed(1)} KB`);
