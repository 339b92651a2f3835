// Deliberate bugs in the Ledger, each of which the simulation (or, failing
// that, the core's unit tests) must catch. `make mutants` runs it
// (scripts/mutants.sh bugs), on a scratch copy of the sources:
//
//   node scripts/deliberate-bugs.mjs DIR      DIR: a copy of the repository's
//                                            sources (scripts/mutants.sh makes it)
//
// For each bug: its edits are applied to DIR (each an exact string that must
// be found exactly once, so a refactor that moves the code fails here
// loudly instead of leaving the bug "uncaught by absence"), the simulation
// runs (`cargo test -p onejob-core --test simulation`, SEEDS seeds, default
// 10,000) and must fail; if it passes, the core's other tests run (`--lib
// --tests`: its unit tests and every integration test) and must fail. Then
// DIR is put back. It prints each bug: its name, caught or not, and by what
// (the invariant and the first failing seed, or the tests that failed), and
// exits 1 if one was not caught (or did not build: a bug that does not
// compile proves nothing).
// BUGS=a,f2 runs only those. Each bug's log: DIR/../bugs/NAME.log.
// `--check` only checks, in the working tree and without writing, that
// every edit applies (each text found exactly once).
//
// Builds use the caller's cargo environment (scripts/mutants.sh sets the
// target dir and the profile).

import { spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';

const check = process.argv[2] === '--check';
const dir = resolve(check ? '.' : (process.argv[2] ?? ''));
if (!process.argv[2]) {
  console.error('usage: node scripts/deliberate-bugs.mjs DIR | --check');
  process.exit(2);
}

const DRIVE = 'crates/core/src/ledger/request/drive.rs';
const JOB = 'crates/core/src/job/mod.rs';
const EFFECTS = 'crates/core/src/ledger/effects/run.rs';
const DELIVERY = 'crates/core/src/ledger/background/delivery_machine.rs';
const OUTBOX = 'crates/core/src/ledger/background/outbox.rs';
const STATEMENTS = 'crates/core/src/ledger/storage/statements.rs';

/** Each bug: a name, what it is, and its edits: [file, exact text, replacement]. */
const BUGS = [
  {
    name: 'a',
    what: 'the claim persisted after the provider call (the Call before the Persist of the claim)',
    edits: [
      [
        DRIVE,
        `                self.stored = true;
                self.persist(expected, Then::Claimed { choice, ticket }, cx);`,
        `                self.stored = true;
                let (provider, model, probe) = (choice.provider, choice.model.clone(), choice.probe);
                cx.push(Command::Call { ticket, provider, model, probe });
                self.persist(expected, Then::Claimed { choice, ticket }, cx);`,
      ],
      [
        DRIVE,
        `                let flight = Flight { ticket, provider: choice.provider };
                cx.push(Command::Call { ticket, provider: choice.provider, model: choice.model, probe: choice.probe });
`,
        `                let flight = Flight { ticket, provider: choice.provider };
`,
      ],
    ],
  },
  {
    name: 'b',
    what: "a compare-and-swap that ignores the version (an attempt's ticket of another version holds the job)",
    edits: [
      [
        JOB,
        'in_play && self.version == ticket.version && self.attempts.len() as u32 == ticket.attempt',
        'in_play && self.attempts.len() as u32 == ticket.attempt',
      ],
    ],
  },
  {
    name: 'b2',
    what: "a compare-and-swap that ignores the version (the job's claim and hedge accept any version read)",
    edits: [[JOB, '        if expected == self.version {\n', '        if true || expected == self.version {\n']],
  },
  {
    name: 'b3',
    what: "a compare-and-swap that ignores the version (the storage's job UPDATE takes any version at or past the one read)",
    edits: [[STATEMENTS, 'WHERE id = 1 AND version = ?", "job", Missing::Run);', 'WHERE id = 1 AND version >= ?", "job", Missing::Run);']],
  },
  {
    name: 'c',
    what: "a lease checked off by one (`>` for `>=`: the lease holds 1 ms past its end)",
    edits: [[JOB, '.is_some_and(|until| now_ms >= until);', '.is_some_and(|until| now_ms > until);']],
  },
  {
    name: 'c2',
    what: 'a lease checked off by one the other way (over 1 ms before its end)',
    edits: [[JOB, '.is_some_and(|until| now_ms >= until);', '.is_some_and(|until| now_ms + 1 >= until);']],
  },
  {
    name: 'd',
    what: "a replay served from a losing attempt (a completed job replays its last attempt, not its winner)",
    edits: [
      [
        JOB,
        'JobState::Completed => self.completed_by.and_then(|n| self.attempts.iter().find(|a| a.number == n)),',
        'JobState::Completed => self.attempts.last(),',
      ],
    ],
  },
  {
    name: 'd2',
    what: "a losing racer's answer given to its live caller (the drive's check that the job's answer is another attempt's, skipped)",
    edits: [
      [
        DRIVE,
        'if state.is_terminal() && self.job.replayed_attempt().is_some_and(|a| a.number != attempt) {',
        'if false && state.is_terminal() && self.job.replayed_attempt().is_some_and(|a| a.number != attempt) {',
      ],
    ],
  },
  {
    name: 'e',
    what: 'a receipt check skipped before an effect (a claim never recorded is performed again, its receipt not asked)',
    edits: [
      [
        EFFECTS,
        `                Step::Reconcile => {
                    self.phase = Phase::Asking;
                    self.stale = true;
                    return vec![Command::AskReceipt { effect: effect.clone() }];`,
        `                Step::Reconcile => {
                    self.phase = Phase::Performing;
                    self.stale = true;
                    return vec![Command::Perform { effect: effect.clone() }];`,
      ],
    ],
  },
  {
    name: 'f',
    what: 'a queue message taken before the drive lock (TakeMessage, then Lock)',
    edits: [
      [
        DELIVERY,
        `(Stage::RequestRead(job), Input::Request { kept: true }) => (Stage::Locked(job), Op::Lock),`,
        `(Stage::RequestRead(job), Input::Request { kept: true }) => (Stage::Locked(job), Op::TakeMessage),`,
      ],
      [
        DELIVERY,
        `(Stage::Locked(job), Input::Done) => (Stage::Taken(job), Op::TakeMessage),`,
        `(Stage::Locked(job), Input::Done) => (Stage::Taken(job), Op::Lock),`,
      ],
    ],
  },
  {
    name: 'f2',
    what: 'a queue message taken, and the quota asked, before the drive lock (Lock only after the quota answered)',
    edits: [
      [
        DELIVERY,
        `            (Stage::RequestRead(job), Input::Request { kept: true }) => (Stage::Locked(job), Op::Lock),
            (Stage::RequestRead(_), Input::Request { kept: false }) => Self::tend(AfterDrive::NOTHING_TO_RUN),
            (Stage::Locked(job), Input::Done) => (Stage::Taken(job), Op::TakeMessage),
            (Stage::Taken(job), Input::Done) => (Stage::Armed(job.clone()), Op::Arm(job)),
            (Stage::Armed(job), Input::Done) => (Stage::AskedQuota(job), Op::AskQuota),
            (Stage::AskedQuota(job), Input::Quota(None)) => (Stage::Driving, Op::Drive(job)),`,
        `            (Stage::RequestRead(job), Input::Request { kept: true }) => (Stage::Locked(job), Op::TakeMessage),
            (Stage::RequestRead(_), Input::Request { kept: false }) => Self::tend(AfterDrive::NOTHING_TO_RUN),
            (Stage::Locked(job), Input::Done) => (Stage::Taken(job.clone()), Op::Arm(job)),
            (Stage::Taken(job), Input::Done) => (Stage::AskedQuota(job), Op::AskQuota),
            (Stage::AskedQuota(job), Input::Quota(None)) => (Stage::Armed(job), Op::Lock),
            (Stage::Armed(job), Input::Done) => (Stage::Driving, Op::Drive(job)),`,
      ],
    ],
  },
  {
    name: 'g',
    what: 'the old outbox rule: a confirmed send presumed lost only after 15-30 minutes (the progress-based look ignored)',
    edits: [
      [
        OUTBOX,
        `    let lost = progress
        .zip(awaited_since(job, outbox))
        .is_some_and(|(progress, since)| outbox.presumed_lost(since, progress, now_ms));`,
        `    let _ = progress;
    let lost = false;`,
      ],
    ],
  },
];

const only = process.env.BUGS ? new Set(process.env.BUGS.split(',').map((s) => s.trim())) : null;
if (only) {
  const unknown = [...only].filter((name) => !BUGS.some((b) => b.name === name));
  if (unknown.length) {
    console.error(`deliberate bugs: no bug named ${unknown.join(', ')}`);
    process.exit(2);
  }
}

/** Runs cargo in DIR; its output (both streams) goes to LOG. Returns its status and output. */
function cargo(args, log) {
  const started = Date.now();
  const run = spawnSync('cargo', args, { cwd: dir, encoding: 'utf8', maxBuffer: 1 << 30, env: process.env });
  const output = `${run.stdout ?? ''}${run.stderr ?? ''}`;
  writeFileSync(log, `$ cargo ${args.join(' ')}\n${output}`, { flag: 'a' });
  return { status: run.status, output, seconds: (Date.now() - started) / 1000 };
}

// A build that failed (cargo's `error: test failed` is a test's failure, not the build's).
const built = (output) => !/^error\[E\d+\]:/m.test(output) && !/could not compile/.test(output);

/** What a failing simulation says first: its first violation (the lowest seed), or its first panic. */
function simulationVerdict(output) {
  const violation = output.match(/^\s+seed (\d+) step (\d+): ([a-z0-9-]+): (.*?)(?: \(rerun: SIM_SEED=\d+\))?$/m);
  const total = output.match(/(\d+) violations in (\d+) seeds/);
  if (violation) {
    const [, seed, step, check, message] = violation;
    const short = message.length > 140 ? `${message.slice(0, 140)}…` : message;
    const count = total ? ` (${total[1]} violations in ${total[2]} seeds)` : '';
    return `simulation: seed ${seed} step ${step}: ${check}: ${short}${count}`;
  }
  const failed = [...output.matchAll(/^test (\S+) \.\.\. FAILED$/gm)].map((m) => m[1]);
  const panic = output.match(/panicked at [^\n]*\n([^\n]*)/);
  return `simulation: ${failed.join(', ') || 'failed'}${panic ? `: ${panic[1].slice(0, 160)}` : ''}`;
}

function unitVerdict(output) {
  const failed = [...output.matchAll(/^test (\S+) \.\.\. FAILED$/gm)].map((m) => m[1]);
  const shown = failed.slice(0, 3).join(', ') + (failed.length > 3 ? `, … (${failed.length} tests)` : '');
  return `core tests: ${shown || 'failed'}`;
}

/** The text of `file` with `from` replaced by `to`; throws unless `from` is found exactly once. */
function edited(text, file, from, to) {
  const found = text.split(from).length - 1;
  if (found !== 1) throw new Error(`${file}: the text to replace is found ${found} times, not once:\n${from}`);
  return text.replace(from, () => to);
}

if (check) {
  let bad = 0;
  for (const bug of BUGS) {
    const texts = new Map();
    for (const [file, from, to] of bug.edits) {
      try {
        texts.set(file, edited(texts.get(file) ?? readFileSync(join(dir, file), 'utf8'), file, from, to));
      } catch (error) {
        bad += 1;
        console.log(`bug ${bug.name}: ${error.message}`);
      }
    }
  }
  console.log(`deliberate bugs: ${BUGS.length} bugs, ${bad ? `${bad} edits do not apply` : 'every edit applies'}`);
  process.exit(bad ? 1 : 0);
}

const logs = resolve(dir, '..', 'bugs');
mkdirSync(logs, { recursive: true });

const seeds = process.env.SEEDS ?? '10000';
const simArgs = ['test', '-p', 'onejob-core', '--test', 'simulation'];
const unitArgs = ['test', '-p', 'onejob-core', '--lib', '--tests'];
const env = process.env;
env.SEEDS = seeds;
delete env.SIM_SEED;
delete env.SIM_FIRST;

// The unmodified sources must pass both first, or every bug would look caught.
{
  const log = join(logs, 'baseline.log');
  writeFileSync(log, '');
  for (const args of [simArgs, unitArgs]) {
    const run = cargo(args, log);
    if (run.status !== 0) {
      console.log(`deliberate bugs: the unmodified sources fail \`cargo ${args.join(' ')}\` (see ${log})`);
      process.exit(1);
    }
  }
}

const results = [];
for (const bug of BUGS.filter((b) => !only || only.has(b.name))) {
  const originals = new Map();
  let verdict;
  let caught = false;
  const log = join(logs, `${bug.name}.log`);
  writeFileSync(log, `bug ${bug.name}: ${bug.what}\n`);
  try {
    for (const [file, from, to] of bug.edits) {
      const path = join(dir, file);
      const text = readFileSync(path, 'utf8');
      if (!originals.has(path)) originals.set(path, text);
      writeFileSync(path, edited(text, file, from, to));
    }
    const sim = cargo(simArgs, log);
    if (!built(sim.output)) {
      verdict = 'did not build (see the log)';
    } else if (sim.status !== 0) {
      caught = true;
      verdict = simulationVerdict(sim.output);
    } else {
      const unit = cargo(unitArgs, log);
      if (!built(unit.output)) {
        verdict = 'simulation passed; the unit tests did not build (see the log)';
      } else if (unit.status !== 0) {
        caught = true;
        verdict = `simulation passed ${seeds} seeds; ${unitVerdict(unit.output)}`;
      } else {
        verdict = `NOT CAUGHT: the simulation (${seeds} seeds) and the unit tests pass`;
      }
    }
  } catch (error) {
    verdict = `could not be applied: ${error.message}`;
  } finally {
    for (const [path, text] of originals) writeFileSync(path, text);
  }
  results.push({ bug, caught });
  console.log(`bug ${bug.name}: ${bug.what}\n  caught: ${caught ? 'yes' : 'no'}, ${verdict}`);
}

const missed = results.filter((r) => !r.caught).map((r) => r.bug.name);
console.log(
  `deliberate bugs: ${results.length} applied, ${results.length - missed.length} caught` +
    (missed.length ? `, NOT caught: ${missed.join(', ')}` : ''),
);
process.exit(missed.length ? 1 : 0);
