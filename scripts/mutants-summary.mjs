// The figures of a cargo-mutants run (scripts/mutants.sh), from its
// mutants.out (also of a run that was stopped: it is written as it goes):
//
//   node scripts/mutants-summary.mjs target/mutants/mutants.out
//
// mutants: N tested, caught C, missed M, timeout T, unviable U (X min)
// mutants: of the C caught, the simulation caught S; the other tests alone C-S
// then the missed and timed-out mutants, one a line (file:line:column: the mutation).

import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

const out = process.argv[2];
if (!out || !existsSync(join(out, 'outcomes.json'))) {
  console.error('usage: node scripts/mutants-summary.mjs DIR/mutants.out (with its outcomes.json)');
  process.exit(2);
}
const run = JSON.parse(readFileSync(join(out, 'outcomes.json'), 'utf8'));
const mutants = run.outcomes.filter((o) => o.scenario?.Mutant);
const by = (summary) => mutants.filter((o) => o.summary === summary);
const caught = by('CaughtMutant');
const missed = by('MissedMutant');
const timeout = by('Timeout');
const unviable = by('Unviable');

/** Whether the simulation's test binary failed (or died) in this mutant's test run. */
function simulationCaught(outcome) {
  const log = join(out, outcome.log_path);
  if (!existsSync(log)) return false;
  const text = readFileSync(log, 'utf8');
  // cargo test --verbose names the binary it runs: …/deps/simulation-HASH.
  const start = text.search(/Running (tests\/simulation\.rs|`[^`\n]*\/deps\/simulation-[0-9a-f]+`)/);
  if (start < 0) return false;
  const section = text.slice(start).split(/\n\s+Running /)[0];
  return !/test result: ok\./.test(section);
}

const bySimulation = caught.filter(simulationCaught).length;
const seconds = (Date.parse(run.end_time ?? new Date().toISOString()) - Date.parse(run.start_time)) / 1000;
const name = (o) => o.scenario.Mutant.name;

console.log(
  `mutants: ${mutants.length} tested, caught ${caught.length}, missed ${missed.length}, ` +
    `timeout ${timeout.length}, unviable ${unviable.length} (${Math.round(seconds / 60)} min` +
    (run.total_mutants > mutants.length ? `; ${run.total_mutants - mutants.length} of ${run.total_mutants} not tested` : '') +
    ')',
);
console.log(
  `mutants: of the ${caught.length} caught, the simulation caught ${bySimulation}; ` +
    `the core's other tests alone ${caught.length - bySimulation}`,
);
for (const [title, list] of [
  ['missed', missed],
  ['timed out', timeout],
]) {
  if (list.length) {
    console.log(`${title}:`);
    for (const o of list.map(name).sort(byPlace)) console.log(`  ${o}`);
  }
}

/** Sorts `file:line:column: …` names by file, then line. */
function byPlace(a, b) {
  const [fa, la] = a.split(':');
  const [fb, lb] = b.split(':');
  return fa === fb ? Number(la) - Number(lb) : fa < fb ? -1 : 1;
}
