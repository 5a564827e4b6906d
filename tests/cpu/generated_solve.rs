//! The GPU's generated multiplier solve (`gpu::solve::solve_multipliers`) run on the CPU: a small
//! evaluator for the straight-line WGSL it emits (one statement per line; `let`, assignments,
//! `select`, `sqrt`, `is_finite_real`, arithmetic and comparisons) executes the generated text in
//! f64 and holds it against the reference solver (`cpu::solver::solve_min_norm_spd`). This
//! proves what the GPU parity tests cannot see: that well-posed systems take the certified route
//! (and do not silently fall back to the Jacobi route, which gives the same λ), that redundant
//! rows do fall back, that unused rows get λ = 0, and that the generated code reads the
//! triangle of `a` the CPU reads.

use std::collections::HashMap;

use nalgebra::{DMatrix, DVector};
use simbatch::cpu::solver::{RANK_TOLERANCE, solve_min_norm_spd};
use simbatch::gpu::solve::{MAX_STRAIGHT_ROWS, solve_multipliers};

/// What the generated function returned.
#[derive(Debug, PartialEq)]
enum Outcome {
    /// The certified route's solution.
    Certified(Vec<f64>),
    /// It called the Jacobi route.
    Fallback,
}

#[derive(Debug, Clone, Copy)]
enum V {
    F(f64),
    B(bool),
}

impl V {
    fn f(self) -> f64 {
        match self {
            V::F(x) => x,
            V::B(_) => panic!("a number was expected"),
        }
    }
    fn b(self) -> bool {
        match self {
            V::B(x) => x,
            V::F(_) => panic!("a boolean was expected"),
        }
    }
}

fn tokens(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let c: Vec<char> = s.chars().collect();
    let mut i = 0;
    while i < c.len() {
        let ch = c[i];
        if ch.is_whitespace() {
            i += 1;
        } else if ch.is_ascii_alphanumeric() || ch == '_' || ch == '.' {
            let start = i;
            while i < c.len() && (c[i].is_ascii_alphanumeric() || c[i] == '_' || c[i] == '.') {
                i += 1;
            }
            out.push(c[start..i].iter().collect());
        } else if i + 1 < c.len() && matches!((ch, c[i + 1]), ('&', '&') | ('|', '|') | ('!', '='))
        {
            out.push(c[i..i + 2].iter().collect());
            i += 2;
        } else {
            out.push(ch.to_string());
            i += 1;
        }
    }
    out
}

/// Recursive descent over one expression, in WGSL's precedence.
struct Expr<'a> {
    t: Vec<String>,
    at: usize,
    env: &'a HashMap<String, V>,
    a: &'a [f64],
    rhs: &'a [f64],
    used: &'a [u32],
}

impl Expr<'_> {
    fn peek(&self) -> &str {
        self.t.get(self.at).map_or("", |s| s.as_str())
    }
    fn next(&mut self) -> String {
        self.at += 1;
        self.t[self.at - 1].clone()
    }
    fn expect(&mut self, s: &str) {
        assert_eq!(self.next(), s, "in {:?}", self.t);
    }
    fn index(&mut self) -> usize {
        self.expect("[");
        let k = self.next().trim_end_matches('u').parse().unwrap();
        self.expect("]");
        k
    }
    fn or(&mut self) -> V {
        let mut x = self.and();
        while self.peek() == "||" {
            self.next();
            let y = self.and();
            x = V::B(x.b() || y.b());
        }
        x
    }
    fn and(&mut self) -> V {
        let mut x = self.compare();
        while self.peek() == "&&" {
            self.next();
            let y = self.compare();
            x = V::B(x.b() && y.b());
        }
        x
    }
    fn compare(&mut self) -> V {
        let x = self.sum();
        match self.peek() {
            ">" | "<" | "!=" => {
                let op = self.next();
                let (x, y) = (x.f(), self.sum().f());
                V::B(match op.as_str() {
                    ">" => x > y,
                    "<" => x < y,
                    _ => x != y,
                })
            }
            _ => x,
        }
    }
    fn sum(&mut self) -> V {
        let mut x = self.product();
        while matches!(self.peek(), "+" | "-") {
            let op = self.next();
            let y = self.product().f();
            x = V::F(if op == "+" { x.f() + y } else { x.f() - y });
        }
        x
    }
    fn product(&mut self) -> V {
        let mut x = self.unary();
        while matches!(self.peek(), "*" | "/") {
            let op = self.next();
            let y = self.unary().f();
            x = V::F(if op == "*" { x.f() * y } else { x.f() / y });
        }
        x
    }
    fn unary(&mut self) -> V {
        match self.peek() {
            "!" => {
                self.next();
                V::B(!self.unary().b())
            }
            "-" => {
                self.next();
                V::F(-self.unary().f())
            }
            _ => self.primary(),
        }
    }
    fn primary(&mut self) -> V {
        let t = self.next();
        if t == "(" {
            let x = self.or();
            self.expect(")");
            return x;
        }
        if t.starts_with(|c: char| c.is_ascii_digit()) {
            return V::F(t.trim_end_matches('u').parse().unwrap());
        }
        match t.as_str() {
            "true" => V::B(true),
            "false" => V::B(false),
            "RANK_TOLERANCE" => V::F(RANK_TOLERANCE),
            "used" => V::F(self.used[self.index()] as f64),
            "a" => V::F(self.a[self.index()]),
            "rhs" => V::F(self.rhs[self.index()]),
            "select" | "sqrt" | "is_finite_real" => {
                self.expect("(");
                let mut args = vec![self.or()];
                while self.peek() == "," {
                    self.next();
                    args.push(self.or());
                }
                self.expect(")");
                match t.as_str() {
                    // select(false value, true value, condition)
                    "select" => {
                        if args[2].b() {
                            args[1]
                        } else {
                            args[0]
                        }
                    }
                    "sqrt" => V::F(args[0].f().sqrt()),
                    _ => V::B(args[0].f().is_finite()),
                }
            }
            name => *self
                .env
                .get(name)
                .unwrap_or_else(|| panic!("unbound {name}")),
        }
    }
}

/// Runs the generated `solve_multipliers` for `rows` rows on `a` (row-major), `rhs` and `used`.
fn run(rows: usize, a: &[f64], rhs: &[f64], used: &[u32]) -> Outcome {
    let source = solve_multipliers(rows);
    let mut env: HashMap<String, V> = HashMap::new();
    let mut x = vec![f64::NAN; rows];
    let mut skipping = false;
    for line in source.lines().map(str::trim) {
        if line.starts_with("//") || line.starts_with("fn ") || line.starts_with("var x:") {
            continue;
        }
        if line == "}" {
            skipping = false;
            continue;
        }
        if skipping {
            continue;
        }
        if line.starts_with("return min_norm_fallback") {
            return Outcome::Fallback;
        }
        if line == "return x;" {
            return Outcome::Certified(x);
        }
        if let Some(cond) = line.strip_prefix("if ").and_then(|l| l.strip_suffix('{')) {
            let value = eval(cond, &env, a, rhs, used).b();
            skipping = !value;
            continue;
        }
        let statement = line.strip_suffix(';').expect(line);
        let (target, expr) = statement.split_once(" = ").expect(line);
        let value = eval(expr, &env, a, rhs, used);
        let target = target.trim_start_matches("let ").trim_start_matches("var ");
        if let Some(k) = target.strip_prefix("x[").and_then(|t| t.strip_suffix(']')) {
            x[k.parse::<usize>().unwrap()] = value.f();
        } else {
            env.insert(target.to_string(), value);
        }
    }
    panic!("the generated solve did not return:\n{source}");
}

fn eval(expr: &str, env: &HashMap<String, V>, a: &[f64], rhs: &[f64], used: &[u32]) -> V {
    let mut e = Expr {
        t: tokens(expr),
        at: 0,
        env,
        a,
        rhs,
        used,
    };
    let v = e.or();
    assert_eq!(e.at, e.t.len(), "unparsed tail of {expr}");
    v
}

/// A deterministic pseudo-random value in [-1, 1).
fn draw(seed: &mut u64) -> f64 {
    *seed = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    ((*seed >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0
}

/// `B Bᵀ + shift · 1` for a random `m × k` matrix `B` (rank k when shift = 0).
fn spd(m: usize, k: usize, shift: f64, seed: &mut u64) -> DMatrix<f64> {
    let b = DMatrix::from_fn(m, k, |_, _| draw(seed));
    &b * b.transpose() + DMatrix::identity(m, m) * shift
}

/// `a` as `gram_matrix` lays it out: row-major, with the CPU's lower triangle `A[i][j]` (i ≥ j)
/// at `a[j · m + i]`; the other triangle holds values the solve must not read.
fn as_gram(a: &DMatrix<f64>) -> Vec<f64> {
    let m = a.nrows();
    let mut out = vec![0.0; m * m];
    for r in 0..m {
        for q in 0..m {
            out[r * m + q] = if r <= q {
                a[(q, r)]
            } else {
                1e3 * (r + q) as f64
            };
        }
    }
    out
}

#[test]
fn well_posed_systems_take_the_certified_route_and_match_the_reference() {
    let mut seed = 17;
    for m in 1..=MAX_STRAIGHT_ROWS {
        for _ in 0..5 {
            let a = spd(m, m, 0.5, &mut seed);
            let rhs = DVector::from_fn(m, |_, _| draw(&mut seed));
            let (reference, rank) = solve_min_norm_spd(&a, &rhs);
            assert_eq!(rank, m);
            let Outcome::Certified(x) = run(m, &as_gram(&a), rhs.as_slice(), &vec![1; m]) else {
                panic!("{m} rows: a well-posed system fell back to the Jacobi route");
            };
            for (k, (x, r)) in x.iter().zip(reference.iter()).enumerate() {
                assert!(
                    (x - r).abs() <= 1e-10 * r.abs().max(1.0),
                    "{m} rows, λ[{k}]: {x} against the reference {r}"
                );
            }
        }
    }
}

#[test]
fn redundant_rows_fall_back_to_the_minimum_norm_route() {
    let mut seed = 5;
    for m in 2..=MAX_STRAIGHT_ROWS {
        // Rank m − 1: a brick's coplanar corners.
        let a = spd(m, m - 1, 0.0, &mut seed);
        let rhs = &a * DVector::from_fn(m, |_, _| draw(&mut seed));
        assert_eq!(
            run(m, &as_gram(&a), rhs.as_slice(), &vec![1; m]),
            Outcome::Fallback,
            "{m} rows of rank {}",
            m - 1
        );
    }
}

#[test]
fn rows_not_in_use_get_zero_and_leave_the_others_as_without_them() {
    let mut seed = 9;
    for m in 2..=MAX_STRAIGHT_ROWS {
        let full = spd(m, m, 0.5, &mut seed);
        let rhs_full = DVector::from_fn(m, |_, _| draw(&mut seed));
        // Row `off` is not in use: zero row and column in A and zero rhs, as the kernels give it.
        let off = m / 2;
        let mut a = full.clone();
        let mut rhs = rhs_full.clone();
        for k in 0..m {
            a[(off, k)] = 0.0;
            a[(k, off)] = 0.0;
        }
        rhs[off] = 0.0;
        let mut used = vec![1; m];
        used[off] = 0;
        let Outcome::Certified(x) = run(m, &as_gram(&a), rhs.as_slice(), &used) else {
            panic!("{m} rows with one unused: fell back");
        };
        // The reference without the row.
        let keep: Vec<usize> = (0..m).filter(|k| *k != off).collect();
        let reduced = DMatrix::from_fn(m - 1, m - 1, |i, j| full[(keep[i], keep[j])]);
        let reduced_rhs = DVector::from_fn(m - 1, |i, _| rhs_full[keep[i]]);
        let (reference, _) = solve_min_norm_spd(&reduced, &reduced_rhs);
        assert_eq!(x[off], 0.0, "{m} rows: the unused row's λ");
        for (i, k) in keep.iter().enumerate() {
            assert!(
                (x[*k] - reference[i]).abs() <= 1e-10 * reference[i].abs().max(1.0),
                "{m} rows, λ[{k}]: {} against {}",
                x[*k],
                reference[i]
            );
        }
    }
}

#[test]
fn beyond_the_straight_line_limit_every_system_takes_the_jacobi_route() {
    let m = MAX_STRAIGHT_ROWS + 1;
    let mut seed = 3;
    let a = spd(m, m, 0.5, &mut seed);
    let rhs = vec![1.0; m];
    assert_eq!(run(m, &as_gram(&a), &rhs, &vec![1; m]), Outcome::Fallback);
}

/// Systems that are not positive definite fall back, each caught by one test of the route:
/// for two and three rows (the closed form) a negative leading minor while the others are
/// positive, for four (the factor) a negative third pivot.
#[test]
fn systems_that_are_not_positive_definite_fall_back() {
    let systems: [(usize, Vec<f64>); 6] = [
        (2, vec![1.0, 2.0, 2.0, 1.0]),   // det A < 0, a₀₀ > 0
        (2, vec![-1.0, 0.0, 0.0, -1.0]), // a₀₀ < 0, det A > 0
        (3, vec![-1.0, 0.0, 0.0, 0.0, -1.0, 0.0, 0.0, 0.0, 1.0]), // a₀₀ < 0 alone
        (3, vec![1.0, 2.0, 0.0, 2.0, 1.0, 0.0, 0.0, 0.0, -1.0]), // the 2×2 minor alone
        (3, vec![2.0, 1.0, 1.0, 1.0, 2.0, 1.0, 1.0, 1.0, -5.0]), // det A alone
        (
            4,
            vec![
                1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, -3.0, 0.0, 0.0, 0.0, 0.0, 1.0,
            ],
        ),
    ];
    for (m, a) in systems {
        let rhs = vec![1.0; m];
        assert_eq!(
            run(m, &a, &rhs, &vec![1; m]),
            Outcome::Fallback,
            "{m} rows: {a:?}"
        );
    }
}

/// The closed form's determinant grows as the cube of the entries: where it leaves the range
/// of f64 (entries of 1e110 or 1e-110 for three rows), the system falls back to the Jacobi
/// route; at 1e90 and 1e-90 it still takes the certified route and matches the reference.
#[test]
fn a_determinant_out_of_range_falls_back() {
    let mut seed = 13;
    let a = spd(3, 3, 0.5, &mut seed);
    let rhs = DVector::from_fn(3, |_, _| draw(&mut seed));
    for (scale, certified) in [(1e90, true), (1e-90, true), (1e110, false), (1e-110, false)] {
        let scaled = &a * scale;
        match run(3, &as_gram(&scaled), rhs.as_slice(), &[1; 3]) {
            Outcome::Fallback => assert!(!certified, "scale {scale:e} fell back"),
            Outcome::Certified(x) => {
                assert!(certified, "scale {scale:e} was certified");
                let (reference, _) = solve_min_norm_spd(&scaled, &rhs);
                for (x, r) in x.iter().zip(reference.iter()) {
                    assert!(
                        (x - r).abs() <= 1e-10 * r.abs(),
                        "scale {scale:e}: {x} / {r}"
                    );
                }
            }
        }
    }
}
