// The Makefile's builds run only when one of their sources changed (`make
// dev` on a second run starts at once), and a build that fails leaves
// nothing to run. The rules are read with `make -n -W FILE` (what would run
// if FILE were newer: nothing is touched or built); the edge build's rule
// itself runs in a copy of the Makefile over a scratch tree whose
// `worker-build` is a script that counts its runs and can fail.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { chmodSync, cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { fileURLToPath } from "node:url";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const EDGE = "crates/edge/build/.built";
const EDGE_TEST = "crates/edge/build-test/.built";
const EDGE_DEPLOY = "crates/edge/build-deploy/.built";
const CLIENT = "crates/client/pkg/.built";

const make = (args, cwd = ROOT) => spawnSync("make", args, { cwd, encoding: "utf8" });
/** The stamps `make` would rebuild if `file` were newer than everything. */
const rebuiltBy = (file) =>
  [EDGE, EDGE_TEST, EDGE_DEPLOY, CLIENT].filter((stamp) => {
    const { status, stdout } = make(["-s", "-n", "-W", file, stamp]);
    assert.equal(status, 0, stdout);
    return stdout.trim() !== "";
  });

describe("make's builds", () => {
  describe("in this checkout", () => {
    before(() => {
      const stale = [EDGE, EDGE_TEST, EDGE_DEPLOY, CLIENT].filter((stamp) => make(["-q", stamp]).status !== 0);
      assert.deepEqual(stale, [], "these builds are not current: make build-edge build-edge-test build-edge-deploy build-client first");
    });

    test("each build is made from its own sources: a core edit rebuilds all four, an edge one the worker, the SDK's JS the client", () => {
      assert.deepEqual(rebuiltBy("crates/core/src/lib.rs"), [EDGE, EDGE_TEST, EDGE_DEPLOY, CLIENT]);
      assert.deepEqual(rebuiltBy("Cargo.lock"), [EDGE, EDGE_TEST, EDGE_DEPLOY, CLIENT]);
      assert.deepEqual(rebuiltBy("crates/edge/src/lib.rs"), [EDGE, EDGE_TEST, EDGE_DEPLOY]);
      assert.deepEqual(rebuiltBy("crates/edge/build.rs"), [EDGE, EDGE_TEST, EDGE_DEPLOY]);
      assert.deepEqual(rebuiltBy("crates/core/examples/job-types.rs"), [EDGE, EDGE_TEST, EDGE_DEPLOY], "it writes each build's job-types.json");
      // The demo's job types are in the builds make dev and the tests run, not in a deployment's (issue 34).
      assert.deepEqual(rebuiltBy("jobs/triage.json"), [EDGE, EDGE_TEST], "job types are bundled into the worker");
      assert.deepEqual(rebuiltBy("crates/client/src/lib.rs"), [CLIENT]);
      assert.deepEqual(rebuiltBy("crates/client/js/sdk.js"), [CLIENT]);
      assert.deepEqual(rebuiltBy("crates/client/js/README.md"), [CLIENT], "the SDK's README ships in its package");
      assert.deepEqual(rebuiltBy("README.md"), []);
      assert.deepEqual(rebuiltBy("crates/core/tests/simulation.rs"), [], "the core's tests are in no build");
    });

    test("make build prints the size reports when it rebuilds, make dev does not", () => {
      const build = make(["-n", "-W", "crates/client/js/sdk.js", "build-edge", "build-client"]);
      assert.match(build.stdout, /size-report\.sh/);
      const dev = make(["-n", "-W", "crates/core/src/lib.rs", "dev"]);
      assert.equal(dev.status, 0, dev.stderr);
      assert.match(dev.stdout, /worker-build/, "make dev rebuilds what changed");
      assert.doesNotMatch(dev.stdout, /size-report\.sh|scripts\/size\.sh/);
      assert.match(dev.stdout, /size-bar\.sh/, "the SDK's size bar still holds");
    });
  });

  describe("the worker's rule, in a scratch tree", () => {
    let dir;
    const runs = () => (existsSync(path.join(dir, "runs")) ? readFileSync(path.join(dir, "runs"), "utf8").split("\n").filter(Boolean).length : 0);
    const build = () => make(["-s", "build-edge"], dir);
    before(() => {
      dir = mkdtempSync(path.join(tmpdir(), "onejob-make-"));
      cpSync(path.join(ROOT, "Makefile"), path.join(dir, "Makefile"));
      for (const file of ["Cargo.toml", "Cargo.lock", "crates/core/Cargo.toml", "crates/core/src/lib.rs", "crates/core/examples/job-types.rs", "crates/edge/Cargo.toml", "crates/edge/build.rs", "crates/edge/src/lib.rs", "crates/client/Cargo.toml", "crates/client/src/lib.rs", "crates/client/js/sdk.js", "jobs/triage.json"]) {
        mkdirSync(path.dirname(path.join(dir, file)), { recursive: true });
        writeFileSync(path.join(dir, file), "");
      }
      // A worker-build that writes the two files, or fails (FAIL set) after
      // writing half of them, and logs the folder of job types it was given;
      // a cargo whose job-types example names the folder it read; and a size
      // report that says it ran.
      mkdirSync(path.join(dir, "bin"));
      mkdirSync(path.join(dir, "scripts"));
      writeFileSync(
        path.join(dir, "bin/worker-build"),
        `#!/usr/bin/env bash
out=\${3:?}; echo "run \${ONEJOB_JOB_TYPES:-none}" >> ../../runs; mkdir -p "$out"; echo wasm > "$out/index_bg.wasm"
[ -e ../../FAIL ] && { echo "error: it does not compile"; exit 101; }
echo js > "$out/index.js"\n`,
      );
      chmodSync(path.join(dir, "bin/worker-build"), 0o755);
      writeFileSync(path.join(dir, "bin/cargo"), `#!/usr/bin/env bash\necho "{\\"read\\": \\"\${@: -1}\\"}"\n`);
      chmodSync(path.join(dir, "bin/cargo"), 0o755);
      writeFileSync(path.join(dir, "scripts/.env"), `export PATH="${path.join(dir, "bin")}:$PATH"\n`);
      writeFileSync(path.join(dir, "scripts/size.sh"), "echo size: reported\n");
      // Sources older than anything built.
      const old = new Date("2020-01-01");
      for (const file of ["Cargo.toml", "Cargo.lock", "crates/core/src/lib.rs", "crates/edge/src/lib.rs", "jobs/triage.json", "jobs"]) utimesSync(path.join(dir, file), old, old);
    });
    after(() => rmSync(dir, { recursive: true, force: true }));

    test("builds once, then not again until a source is newer", () => {
      assert.equal(build().status, 0);
      assert.equal(runs(), 1);
      assert.ok(existsSync(path.join(dir, EDGE)));
      const again = build();
      assert.equal(again.status, 0);
      assert.equal(runs(), 1, "nothing changed: no build");
      assert.equal(again.stdout, "", "and nothing printed");
      writeFileSync(path.join(dir, "crates/core/src/lib.rs"), "// edited\n");
      const edited = build();
      assert.equal(runs(), 2, "a .rs edit rebuilds");
      assert.match(edited.stdout, /size: reported/, "with its size report");
    });

    test("the builds make dev and the tests run have the demo's job types (jobs/), with the needs of that folder beside them", () => {
      assert.equal(build().status, 0);
      const runs = readFileSync(path.join(dir, "runs"), "utf8").trim().split("\n");
      assert.ok(runs.every((line) => line === `run ${path.join(dir, "jobs")}`), runs.join("\n"));
      assert.deepEqual(JSON.parse(readFileSync(path.join(dir, "crates/edge/build/job-types.json"), "utf8")), { read: path.join(dir, "jobs") });
    });

    test("a deployment's build has the folder ONEJOB_JOB_TYPES names, none by default, and is rebuilt when another one is named", () => {
      const deploy = (...vars) => make(["-s", "build-edge-deploy", ...vars], dir);
      const lastRun = () => readFileSync(path.join(dir, "runs"), "utf8").trim().split("\n").at(-1);
      const manifest = () => JSON.parse(readFileSync(path.join(dir, "crates/edge/build-deploy/job-types.json"), "utf8"));
      let before = runs();
      assert.equal(deploy().status, 0);
      assert.equal(runs(), before + 1);
      assert.equal(lastRun(), "run none", "no folder named: no job types (not the demo's)");
      assert.deepEqual(manifest(), { read: "" });
      assert.equal(deploy().status, 0);
      assert.equal(runs(), before + 1, "nothing changed: no build");
      mkdirSync(path.join(dir, "deploy-jobs"));
      writeFileSync(path.join(dir, "deploy-jobs/summarise.json"), "{}");
      assert.equal(deploy("ONEJOB_JOB_TYPES=deploy-jobs").status, 0);
      assert.equal(runs(), before + 2, "another folder named: built again");
      assert.equal(lastRun(), `run ${path.join(dir, "deploy-jobs")}`);
      assert.deepEqual(manifest(), { read: path.join(dir, "deploy-jobs") });
      assert.equal(deploy("ONEJOB_JOB_TYPES=deploy-jobs").status, 0);
      assert.equal(runs(), before + 2, "the same folder: no build");
      writeFileSync(path.join(dir, "jobs/triage.json"), "// edited\n");
      assert.equal(deploy("ONEJOB_JOB_TYPES=deploy-jobs").status, 0);
      assert.equal(runs(), before + 2, "the demo's job types are not a deployment's source");
      before = runs();
      writeFileSync(path.join(dir, "deploy-jobs/translate.json"), "{}");
      assert.equal(deploy("ONEJOB_JOB_TYPES=deploy-jobs").status, 0);
      assert.equal(runs(), before + 1, "a type added to the folder: built again");
      assert.equal(deploy().status, 0);
      assert.equal(runs(), before + 2, "back to none: built again");
      assert.equal(lastRun(), "run none");
      const missing = deploy("ONEJOB_JOB_TYPES=no-such-folder");
      assert.notEqual(missing.status, 0);
      assert.match(missing.stdout + missing.stderr, /ONEJOB_JOB_TYPES=no-such-folder: no such folder of job types/);
      assert.equal(runs(), before + 2, "nothing built from a folder that is not there");
    });

    test("a failed build fails the target and leaves no artifact, old or half-made, and no stamp: the next run builds again", () => {
      writeFileSync(path.join(dir, "FAIL"), "");
      writeFileSync(path.join(dir, "crates/edge/src/lib.rs"), "// broken\n");
      const failed = build();
      assert.notEqual(failed.status, 0, failed.stdout);
      assert.match(failed.stdout, /it does not compile[^]*worker build failed/);
      assert.ok(!existsSync(path.join(dir, EDGE)), "no stamp");
      assert.ok(!existsSync(path.join(dir, "crates/edge/build/index.js")), "no old or half-made worker to run");
      rmSync(path.join(dir, "FAIL"));
      const runsBefore = runs();
      assert.equal(build().status, 0);
      assert.equal(runs(), runsBefore + 1, "the failed build runs again, with no source changed since");
      assert.ok(existsSync(path.join(dir, EDGE)));
    });
  });
});
