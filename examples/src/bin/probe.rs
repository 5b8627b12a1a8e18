//! Scratch: how well judge prompts rank the right line of real receipts (dev split only).
use contract_backends::local::{LocalBackend, LocalOptions};
use contract_core::prompt::{Message, Messages};

const QS: [(&str, &str); 3] = [
    ("company", "Does this text give the name of the company or shop that issued the receipt?"),
    ("date", "Does this text give the date of the purchase?"),
    ("total", "Does this text give the total amount paid?"),
];

fn norm(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ").to_uppercase()
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let text = std::fs::read_to_string(&args[1])?;
    let n: usize = args[2].parse()?;
    let shape: usize = args[3].parse()?;
    let path = contract_backends::local::fetch::model_path("qwen2.5-coder-0.5b")?;
    let b = LocalBackend::with_options(&path, LocalOptions::default())?;
    let answers = ["yes", "Yes", "no", "No"];
    // per field: [raw top1, raw top3, cal top1, cal top3, found]
    let mut stats = vec![[0usize; 5]; QS.len()];
    let t0 = std::time::Instant::now();
    for line in text.lines().take(n) {
        let row: serde_json::Value = serde_json::from_str(line)?;
        let doc = row["text"].as_str().unwrap_or_default();
        let lines: Vec<&str> = doc.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
        let mut prompts = Vec::new();
        for (_, q) in QS {
            for (i, l) in lines.iter().enumerate() {
                let shown = match shape {
                    0 => l.to_string(),
                    1 => {
                        let prev = if i > 0 { lines[i - 1] } else { "" };
                        let next = lines.get(i + 1).copied().unwrap_or("");
                        format!("{prev}\n>>> {l}\n{next}")
                    }
                    _ => {
                        let next = lines.get(i + 1).copied().unwrap_or("");
                        format!("{l}\n{next}")
                    }
                };
                let user = match shape {
                    1 => format!("{shown}\n\nQuestion: {q} (about the line marked >>>) Answer yes or no."),
                    _ => format!("{shown}\n\nQuestion: {q} Answer yes or no."),
                };
                prompts.push(Messages(vec![Message::user(user)]));
            }
        }
        let s = b.score_prompts(&prompts, &answers)?;
        let m: Vec<f64> = s
            .logprobs
            .iter()
            .map(|lp| contract_core::judge::margin(lp, &answers, &["yes", "Yes"], &["no", "No"]))
            .collect();
        let k = lines.len();
        let mean: Vec<f64> = (0..k)
            .map(|i| (0..QS.len()).map(|q| m[q * k + i]).sum::<f64>() / QS.len() as f64)
            .collect();
        for (qi, (field, _)) in QS.iter().enumerate() {
            let truth = row["truth"][field].as_str().unwrap_or_default();
            let t = match *field {
                "total" => truth.trim_start_matches(['$', 'R', 'M']).trim().to_owned(),
                _ => norm(truth),
            };
            let right: Vec<bool> = lines.iter().map(|l| !t.is_empty() && norm(l).contains(&t)).collect();
            if !right.iter().any(|r| *r) {
                continue;
            }
            stats[qi][4] += 1;
            for (slot, cal) in [(0, false), (2, true)] {
                let mut order: Vec<usize> = (0..k).collect();
                let score = |i: usize| m[qi * k + i] - if cal { mean[i] } else { 0.0 };
                order.sort_by(|a, b| score(*b).total_cmp(&score(*a)));
                let rank = order.iter().position(|&i| right[i]).unwrap_or(k);
                stats[qi][slot] += usize::from(rank == 0);
                stats[qi][slot + 1] += usize::from(rank < 3);
            }
        }
    }
    println!("shape {shape}, {:.0}s", t0.elapsed().as_secs_f64());
    for (qi, (field, _)) in QS.iter().enumerate() {
        let s = stats[qi];
        println!(
            "{field:8} of {:2}: raw top1 {:2} top3 {:2} | calibrated top1 {:2} top3 {:2}",
            s[4], s[0], s[1], s[2], s[3]
        );
    }
    Ok(())
}
