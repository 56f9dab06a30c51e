//! `generates`: a planner writes a file of phases; lint is part of its verification, and its
//! phases join the run after it.

use crate::common::{Test, latest_run};

/// A planner whose first attempt writes an unknown node, and whose next writes two phases (one
/// made from the pipeline's template). Every prompt it gets is appended to `prompts.log`.
const PLANNER: &str = r#"
import os, sys
prompt = sys.stdin.read()
attempt = os.environ["HELIXFLOW_ATTEMPT"]
with open("prompts.log", "a") as log:
    log.write("=== attempt " + attempt + "\n" + prompt + "\n")
os.makedirs("plan", exist_ok=True)
if attempt == "1":
    text = 'phasee "x" { run "true" }\n'
else:
    text = open("next-plan.kdl").read()
open("plan/phases.kdl", "w").write(text)
"#;

const PIPELINE: &str = r#"pipeline "p"
agent "bot" {
    command "python3" "planner.py"
    stdin #true
    cost 0
}
template "step" {
    param "what"
    run "mkdir -p out && echo {{ what }} >> out/{{ what }}.txt && echo {{ what }} >> calls.log"
    outputs { file "out/{{ what }}.txt" }
}
phase "planner" {
    agent "bot"
    prompt "Plan the work.\n{{ feedback }}"
    generates "plan/phases.kdl"
}
phase "report" {
    depends-on "planner"
    run "cat out/a.txt out/b.txt > report.txt"
}
"#;

const NEXT_PLAN: &str = r#"phase "gen-a" {
    depends-on "planner"
    run "mkdir -p out && echo a > out/a.txt && echo a >> calls.log"
    outputs { file "out/a.txt" }
}
phase "gen-b" use="step" what="b" {
    depends-on "gen-a"
}
"#;

#[test]
fn a_planner_s_unknown_node_is_its_retry_s_feedback_and_then_its_phases_run() {
    let test = Test::new()
        .file("planner.py", PLANNER)
        .file("next-plan.kdl", NEXT_PLAN)
        .pipeline(PIPELINE);
    let out = test
        .with_args(&["run", "--no-progress", "pipeline.kdl"])
        .run()
        .code(0);
    let prompts = test.read("prompts.log");
    let second = prompts
        .split("=== attempt 2")
        .nth(1)
        .expect("a second attempt");
    assert!(
        second.contains("plan/phases.kdl:1:1: HF101 unknown node `phasee`"),
        "{prompts}"
    );
    assert!(second.contains("did you mean `phase`?"), "{prompts}");
    assert!(
        out.stderr.contains("[planner] 2 phases made: gen-a, gen-b"),
        "{}",
        out.stderr
    );
    // The phases ran in order, and the planner's dependent waited for them.
    assert_eq!(test.read("calls.log"), "a\nb\n");
    assert_eq!(test.read("report.txt"), "a\nb\n");
    let run = latest_run(test.path());
    for phase in ["gen-a", "gen-b"] {
        assert!(run.join(format!("phases/{phase}/attempt-1")).is_dir());
        assert!(
            test.path()
                .join(format!(".helixflow/passed/{phase}.json"))
                .is_file()
        );
    }
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("run.json")).unwrap()).unwrap();
    let names: Vec<&str> = summary["phases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["planner", "gen-a", "gen-b", "report"]);

    // Once they exist, `status` and `graph` show them; a second run finds them up to date.
    let status = test.with_args(&["status", "pipeline.kdl"]).run().code(0);
    assert!(status.stdout.contains("gen-b"), "{}", status.stdout);
    let graph = test
        .with_args(&["graph", "--format", "json", "pipeline.kdl"])
        .run()
        .code(0)
        .json();
    let gen_b = graph["phases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "gen-b")
        .expect("gen-b in the graph");
    assert_eq!(gen_b["generated-by"], "planner");
    assert!(
        graph["edges"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["from"] == "gen-b" && e["to"] == "report")
    );
    let again = test
        .with_args(&["run", "--no-progress", "pipeline.kdl"])
        .run()
        .code(0);
    assert!(
        again.stderr.contains("[gen-b] up to date"),
        "{}",
        again.stderr
    );
    assert_eq!(test.read("calls.log"), "a\nb\n");
}

#[test]
fn a_generated_phase_may_not_redefine_a_phase_nor_plan_again() {
    let test = Test::new()
        .file("planner.py", PLANNER)
        .file(
            "next-plan.kdl",
            "import \"lib.kdl\"\nphase \"report\" { run \"true\"; }\nphase \"again\" { run \"true\"; generates \"more.kdl\"; }\n",
        )
        .pipeline(&PIPELINE.replace("phase \"planner\" {", "phase \"planner\" {\n    retries 1"));
    let out = test
        .with_args(&["run", "--no-progress", "pipeline.kdl"])
        .run()
        .code(1);
    for expected in [
        "plan/phases.kdl:1:1: HF703 a file of generated phases declares a `import`",
        "HF703 phase \"report\" is a phase of the pipeline already",
        "HF703 phase \"again\" uses `generates`",
    ] {
        assert!(out.stderr.contains(expected), "{expected}\n{}", out.stderr);
    }
}
