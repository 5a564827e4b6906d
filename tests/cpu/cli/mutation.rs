//! Mutated scenario files never make the command panic or hang.

use super::*;

/// A small seeded generator (xorshift64*), so the property test below are reproducible.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// One random mutation of a scenario text: a number replaced by an extreme or a value of
/// another type, a string by garbage, a line deleted or doubled, or the text truncated.
fn mutate(text: &str, rng: &mut Rng) -> String {
    const NUMBERS: [&str; 16] = [
        "0",
        "-1",
        "0.0",
        "-0.0",
        "1e-300",
        "1e300",
        "-1e300",
        "nan",
        "inf",
        "-inf",
        "1e20",
        "3",
        "0.5",
        "9223372036854775807",
        "-9223372036854775808",
        "1e-9",
    ];
    const VALUES: [&str; 8] = [
        "[1, 2]",
        "{ uniform = [2, 1] }",
        "{ normal = [0, -1] }",
        "{ log_uniform = [-1, 1] }",
        "{ choice = [] }",
        "\"$nope\"",
        "true",
        "{ gamma = [1, 2] }",
    ];
    const STRINGS: [&str; 6] = [
        "\"\"",
        "\"x\"",
        "\"ground\"",
        "\"rk5\"",
        "\"ball\"",
        "\"gpu\"",
    ];
    let lines: Vec<&str> = text.lines().collect();
    match rng.below(6) {
        0 | 1 => {
            // A number literal (not inside a name) replaced.
            let spots: Vec<usize> = text
                .char_indices()
                .filter(|(k, c)| {
                    (c.is_ascii_digit() || *c == '-')
                        && !text[..*k].ends_with(|p: char| {
                            p.is_ascii_alphanumeric() || p == '.' || p == '_' || p == '-'
                        })
                })
                .map(|(k, _)| k)
                .collect();
            if spots.is_empty() {
                return text.to_string();
            }
            let at = spots[rng.below(spots.len())];
            let end = text[at..]
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '.' || c == '-' || c == '+'))
                .map_or(text.len(), |e| at + e);
            let with = if rng.below(3) == 0 {
                VALUES[rng.below(VALUES.len())]
            } else {
                NUMBERS[rng.below(NUMBERS.len())]
            };
            format!("{}{with}{}", &text[..at], &text[end..])
        }
        2 => {
            let quotes: Vec<usize> = text.match_indices(" = \"").map(|(k, _)| k + 3).collect();
            if quotes.is_empty() {
                return text.to_string();
            }
            let at = quotes[rng.below(quotes.len())];
            let end = text[at + 1..].find('"').map_or(text.len(), |e| at + e + 2);
            format!(
                "{}{}{}",
                &text[..at],
                STRINGS[rng.below(STRINGS.len())],
                &text[end..]
            )
        }
        3 => {
            let k = rng.below(lines.len());
            lines
                .iter()
                .enumerate()
                .filter(|(j, _)| *j != k)
                .map(|(_, l)| *l)
                .collect::<Vec<_>>()
                .join("\n")
        }
        4 => {
            let k = rng.below(lines.len());
            let mut out: Vec<&str> = lines.clone();
            out.insert(k, lines[k]);
            out.join("\n")
        }
        _ => {
            let mut at = rng.below(text.len());
            while !text.is_char_boundary(at) {
                at -= 1;
            }
            text[..at].to_string()
        }
    }
}

/// Issue 14's property test: 240 randomly mutated scenario files are either refused with a
/// located error or run to the end (on a few instances, a short duration) — never a panic,
/// never a hang — and every result row that says status 0 holds finite state.
#[test]
fn mutated_scenarios_never_panic_or_hang() {
    let dir = scratch("fuzz");
    let bases = [
        SMALL.to_string(),
        ball_study(
            "b",
            "velocity = [{ uniform = [0.0, 2.0] }, 0.0, 0.0]",
            "integrator = \"rkm\"\naccuracy = 1e-4\nduration = 0.05\nassemble = true",
        ),
        DEFAULT_SCENARIO.to_string(),
    ];
    let mut rng = Rng(0x5eed_1234_abcd_0001);
    let (mut refused, mut ran) = (0, 0);
    for case in 0..240 {
        let mut text = bases[case % bases.len()].clone();
        for _ in 0..1 + rng.below(2) {
            text = mutate(&text, &mut rng);
        }
        let parsed = std::panic::catch_unwind(|| Scenario::parse("fuzz.toml", &text));
        let parsed = parsed.unwrap_or_else(|_| panic!("case {case}: parse panicked on\n{text}"));
        let Ok(mut scenario) = parsed else {
            let message = parsed.unwrap_err().to_string();
            if std::env::var("SIMBATCH_FUZZ_VERBOSE").is_ok() {
                eprintln!("case {case}: {message}");
            }
            assert!(
                message.starts_with("fuzz.toml:"),
                "case {case}: unlocated {message}"
            );
            refused += 1;
            continue;
        };
        // Keep each run short: a few instances (unless the count is beyond any memory, which
        // must be refused up front), a short duration, no step count in the millions.
        if scenario.instances < 1_000_000_000_000 {
            scenario.instances = scenario.instances.min(12);
        }
        scenario.simulation.duration = scenario.simulation.duration.min(0.05);
        let step = match scenario.simulation.options.integrator {
            simbatch::step::Integrator::SemiImplicitEuler { step }
            | simbatch::step::Integrator::Rk4 { step } => step,
            simbatch::step::Integrator::RungeKuttaMerson { max_step, .. } => max_step,
        };
        if scenario.simulation.duration / step > 1e5 {
            continue;
        }
        scenario.simulation.backend = Backend::Cpu;
        let out = dir.join(format!("case{case}"));
        let (tx, rx) = std::sync::mpsc::channel();
        let s = scenario.clone();
        let o = out.clone();
        std::thread::spawn(move || {
            let r = std::panic::catch_unwind(|| {
                run_study(&s, None, Backend::Cpu, &o, false, true).map(|_| ())
            });
            let _ = tx.send(r.map_err(|_| ()));
        });
        let result = rx
            .recv_timeout(std::time::Duration::from_secs(120))
            .unwrap_or_else(|_| panic!("case {case}: the run hangs on\n{text}"))
            .unwrap_or_else(|_| panic!("case {case}: the run panicked on\n{text}"));
        match result {
            Err(e) => {
                assert!(!e.to_string().is_empty());
                if std::env::var("SIMBATCH_FUZZ_VERBOSE").is_ok() {
                    eprintln!("case {case}: {e}");
                }
                assert!(!out.exists(), "case {case}: a refused run left output");
                refused += 1;
            }
            Ok(()) => {
                ran += 1;
                let (columns, rows) = results_of(&out);
                let status = column(&columns, "status");
                for (i, v) in &rows {
                    if v[status] == 0.0 {
                        for (c, x) in columns.iter().zip(v) {
                            if c.contains(".e") || c.ends_with(".x") || c.ends_with(".vx") {
                                assert!(
                                    x.is_finite(),
                                    "case {case}: instance {i} {c} = {x} with status 0\n{text}"
                                );
                            }
                        }
                    }
                }
                let _ = std::fs::remove_dir_all(&out);
            }
        }
    }
    println!("mutated scenarios: {refused} refused, {ran} ran");
    assert!(refused > 30 && ran > 20, "{refused} refused, {ran} ran");
    let _ = std::fs::remove_dir_all(&dir);
}
