//! Scoring many prompts at once against one at a time: figures printed, not asserted.
//!
//! ```text
//! cargo bench -p contract-backends --bench score_batch -- [--model NAME_OR_PATH]
//! ```
//!
//! The model: `--model` (a catalogue name or a path), else `CONTRACT_MODEL`, else
//! `qwen2.5-coder-0.5b` (fetched once). 60 made-up receipt lines, each asked a yes/no question
//! (`<line>\n\nQuestion: does this line say X? Answer yes or no.`), answers `yes`, `Yes`, `no`,
//! `No`: first with one question (60 prompts), then with four (240 prompts, the line shared by
//! its four questions). For each: `LocalBackend::score_continuations` in a loop (the passage
//! judge before batching) and `LocalBackend::score_prompts` (the trie and batched forward calls),
//! in the same process one after the other: forward calls, tokens fed, wall time, the largest
//! log-probability difference and whether the ranking by `log P(yes) - log P(no)` is the same.
//! The machine's load average is printed before and after.
//!
//! Environment: `QUESTIONS` (default `1,4`), `SCORE_BATCH` and `SCORE_TOKENS` (the backend's
//! [`LocalOptions::score_batch`] / [`LocalOptions::score_tokens`]; defaults the backend's),
//! `ALONE=0` skips the one-at-a-time loop.

use std::time::Instant;

use contract_backends::local::{candle_thread_env, fetch, LocalBackend, LocalOptions};
use contract_core::judge::margin;
use contract_core::prompt::{Message, Messages};

const ANSWERS: [&str; 4] = ["yes", "Yes", "no", "No"];
const QUESTIONS: [&str; 4] = [
    "does this line say the total amount paid?",
    "does this line give the date of the purchase?",
    "does this line name the shop?",
    "does this line say how the customer paid?",
];

/// 60 receipt-like lines, made up from a few patterns.
fn lines() -> Vec<String> {
    let items = [
        "Organic bananas",
        "Whole milk 2L",
        "Sourdough loaf",
        "Free-range eggs x12",
        "Cheddar 400g",
        "Coffee beans 1kg",
        "Olive oil 750ml",
        "Tomatoes on the vine",
        "Greek yoghurt",
        "Dark chocolate 85%",
    ];
    let shops = [
        "Green Grocer",
        "Harbour Market",
        "Corner Deli",
        "FreshWay",
        "Baker & Sons",
    ];
    let mut out = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let price = 0.59 + 1.37 * i as f64;
        out.push(format!(
            "{} x {item} @ {price:.2} = {:.2}",
            1 + i % 3,
            price * (1 + i % 3) as f64
        ));
        out.push(format!("{item}   {price:.2} A"));
    }
    for (i, shop) in shops.iter().enumerate() {
        out.push(format!("Welcome to {shop}, store #{}", 100 + 17 * i));
        out.push(format!(
            "{} High Street, Leeds LS{} {}AB",
            12 + i,
            i + 1,
            i + 2
        ));
        out.push(format!("Thank you for shopping at {shop}!"));
        out.push(format!(
            "Date: 2024-0{}-{:02}  Time: 1{}:{:02}",
            i + 1,
            3 + 5 * i,
            i,
            7 * i
        ));
    }
    for i in 0..10 {
        let total = 12.5 + 7.25 * i as f64;
        out.push(match i % 5 {
            0 => format!("TOTAL  {total:.2} GBP"),
            1 => format!(
                "Subtotal {:.2}  VAT {:.2}",
                total / 1.2,
                total - total / 1.2
            ),
            2 => format!("Paid by Visa ending {}  {total:.2}", 4000 + 37 * i),
            3 => format!("Cash tendered {:.2}  Change {:.2}", total + 5.0, 5.0),
            _ => format!("Amount due: {total:.2} EUR"),
        });
    }
    for i in 0..10 {
        out.push(match i % 5 {
            0 => format!("Receipt no. {:06}  Till {}", 40213 + i, i % 4 + 1),
            1 => format!("You saved {}.{:02} with your loyalty card", i, 15 * i % 100),
            2 => format!("Card: **** **** **** {:04}  Contactless", 1200 + 91 * i),
            3 => format!("Items sold: {}", 3 + i),
            _ => format!("Returns accepted within {} days with receipt", 14 + i),
        });
    }
    out.truncate(60);
    out
}

fn prompts(lines: &[String], questions: usize) -> Vec<Messages> {
    lines
        .iter()
        .flat_map(|l| {
            QUESTIONS[..questions].iter().map(move |q| {
                Messages(vec![Message::user(format!(
                    "{l}\n\nQuestion: {q} Answer yes or no."
                ))])
            })
        })
        .collect()
}

fn env_usize(k: &str) -> Option<usize> {
    std::env::var(k).ok().and_then(|v| v.trim().parse().ok())
}

fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

/// Per question, the prompts ranked by margin.
fn ranking(logprobs: &[Vec<f64>], questions: usize) -> Vec<Vec<usize>> {
    (0..questions)
        .map(|q| {
            let mut r: Vec<(usize, f64)> = logprobs
                .iter()
                .enumerate()
                .filter(|(i, _)| i % questions == q)
                .map(|(i, lp)| (i, margin(lp, &ANSWERS, &["yes", "Yes"], &["no", "No"])))
                .collect();
            r.sort_by(|a, b| b.1.total_cmp(&a.1));
            r.into_iter().map(|(i, _)| i).collect()
        })
        .collect()
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let mut model = std::env::var("CONTRACT_MODEL").unwrap_or_else(|_| "qwen2.5-coder-0.5b".into());
    while let Some(a) = args.next() {
        if a == "--model" {
            model = args.next().ok_or("--model needs a value")?;
        }
    }
    let mut options = LocalOptions::default();
    if let Some(n) = env_usize("SCORE_BATCH") {
        options = options.score_batch(n);
    }
    if let Some(n) = env_usize("SCORE_TOKENS") {
        options = options.score_tokens(n);
    }
    for (key, value) in candle_thread_env(&options) {
        if std::env::var_os(key).is_none() {
            std::env::set_var(key, value);
        }
    }
    let questions: Vec<usize> = std::env::var("QUESTIONS")
        .unwrap_or_else(|_| "1,4".into())
        .split(',')
        .filter_map(|q| q.trim().parse().ok())
        .filter(|&q| (1..=QUESTIONS.len()).contains(&q))
        .collect();
    let alone = std::env::var("ALONE").map_or(true, |v| v != "0");
    let path = fetch::model_path(&model)?;
    let b = LocalBackend::with_options(&path, options.clone())?;
    println!(
        "model {} ({}), score_batch {}, score_tokens {}, threads {:?}",
        path.display(),
        b.weights_summary(),
        options.score_batch,
        options.score_tokens,
        options.threads
    );
    println!("load average before: {}", load());
    let lines = lines();
    // Warm-up: the thread team, the blank model, the caches' first allocations.
    let warm = prompts(&lines[..2], 1);
    b.score_prompts(&warm, &ANSWERS)?;
    for m in &warm {
        b.score_continuations(&m.0, &ANSWERS)?;
    }
    for q in questions {
        let prompts = prompts(&lines, q);
        println!(
            "\n{} lines x {q} question(s) = {} prompts",
            lines.len(),
            prompts.len()
        );
        let t = Instant::now();
        let batched = b.score_prompts(&prompts, &ANSWERS)?;
        let batched_s = t.elapsed().as_secs_f64();
        println!(
            "  batched:     {:>5} forward calls, {:>6} tokens fed of {} prompt tokens, {:>8.2} s",
            batched.forward_calls, batched.fed_tokens, batched.prompt_tokens, batched_s
        );
        if alone {
            let t = Instant::now();
            let mut calls = 0;
            let mut fed = 0;
            let mut logprobs = Vec::with_capacity(prompts.len());
            for p in &prompts {
                let s = b.score_continuations(&p.0, &ANSWERS)?;
                calls += s.forward_calls;
                fed += s.prompt_tokens - s.reused_tokens;
                logprobs.push(s.logprobs);
            }
            let alone_s = t.elapsed().as_secs_f64();
            println!(
                "  one by one:  {calls:>5} forward calls, {fed:>6} tokens fed, {alone_s:>8.2} s"
            );
            let diff = logprobs
                .iter()
                .zip(&batched.logprobs)
                .flat_map(|(a, b)| a.iter().zip(b).map(|(x, y)| (x - y).abs()))
                .fold(0.0, f64::max);
            println!(
                "  speed-up {:.2}x; max |logprob difference| {diff:.3e}; same ranking: {}",
                alone_s / batched_s,
                ranking(&logprobs, q) == ranking(&batched.logprobs, q)
            );
        }
    }
    println!("\nload average after: {}", load());
    Ok(())
}
