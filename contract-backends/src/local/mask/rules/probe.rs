//! One step's checks over the tokens of a mask ([`Probe`]): the verdicts on tokens that only
//! touch the open number, or start a number or `null`, computed once for the step; the others
//! run on a copy of the scanner. Apart from the scanner because it is the filter's fast path,
//! not a reading of the JSON.

use std::cell::RefCell;
use std::sync::Arc;

use super::numbers::{is_number_byte, Next, NumSet, START_NUMBER_BYTES};
use super::permit::{null_ok, number_set, Rules};
use super::plan::RulePlan;
use super::{is_ws, Blanks, Cur, Frame, Reach, Scanner};

/// One step's checks over the tokens of a mask ([`Probe::new`]). The verdicts of tokens
/// that only extend or end the open number, or only start the next value with a number or
/// `null`, follow from what is computed once for the step: the number set, what it remembers
/// of the literal so far (`Next`), and whether `null` may come. The others run a copy of
/// the scanner ([`Scanner::allows`]). [`Probe::finish`] remembers what the step found.
pub struct Probe<'a> {
    scanner: &'a Scanner,
    plan: &'a RulePlan,
    /// What a token must hold to be checked after the value it ends.
    after_value: Reach,
    /// At a value start, whether `null` may come; `None` elsewhere.
    null: Option<bool>,
    /// At a value start, whether an object (`{`) may come; `None` elsewhere.
    object: Option<bool>,
    /// The numbers the open (or starting) value may be, the literal so far, and what is known
    /// of it: at the step's start and now.
    number: RefCell<Option<(Arc<NumSet>, Next, Next)>>,
}

impl<'a> Probe<'a> {
    /// The checks of one step of `scanner`, for the tokens of one mask ([`Probe::allows`]).
    pub fn new(scanner: &'a Scanner, plan: &'a RulePlan) -> Probe<'a> {
        let lists = scanner.stack.iter().any(|f| matches!(f, Frame::Arr { .. }));
        let (null, object, set, text) = match &scanner.cur {
            Cur::Num { text, set, .. } => (None, None, Some(set.clone()), &text[..]),
            // At a value start, what `start_value` decides on `null`, objects and numbers.
            Cur::None => match scanner.value_at(plan, b'0') {
                Some((slot, ctx)) => {
                    let rules = scanner.rules(plan, ctx);
                    let rules = rules.as_ref();
                    (
                        Some(null_ok(plan, slot, rules)),
                        Some(rules.is_none_or(Rules::non_null_ok)),
                        number_set(plan, slot, rules),
                        &b""[..],
                    )
                }
                None => (None, None, None, &b""[..]),
            },
            _ => (None, None, None, &b""[..]),
        };
        let number = set.map(|set| {
            let known = set.known(text);
            (set, known, known)
        });
        Probe {
            scanner,
            plan,
            after_value: scanner.between_values(lists),
            null,
            object,
            number: RefCell::new(number),
        }
    }

    /// How whitespace-only tokens fare at this step (when [`Scanner::quiet`] is `None`).
    pub fn blanks(&self) -> Blanks {
        match self.scanner.cur {
            Cur::None => Blanks::Neutral,
            Cur::Num { .. } => Blanks::Alike,
            _ => Blanks::Each,
        }
    }

    /// [`Scanner::allows`], for a token of the mask this step.
    pub fn allows(&self, bytes: &[u8]) -> bool {
        self.quick(bytes)
            .unwrap_or_else(|| self.scanner.allows(self.plan, bytes))
    }

    /// The literal written so far of the open number (empty at a value start).
    fn text(&self) -> &[u8] {
        match &self.scanner.cur {
            Cur::Num { text, .. } => text,
            _ => b"",
        }
    }

    /// The verdicts on the one-byte tokens of number bytes (bit `i`: `NUMBER_BYTES[i]`)
    /// that this step already knows without computing anything: `(known, allowed)`. Inside a
    /// number, what is remembered of the literal so far; at a value start, for `-` and the
    /// digits, what is remembered of the empty literal (all refused when numbers cannot come).
    /// Elsewhere nothing. A mask allows mostly digits inside a number: this spares them
    /// [`Probe::allows`].
    pub fn known_number_bytes(&self) -> (u16, u16) {
        let number = self.number.borrow();
        let now = number.as_ref().map(|(_, _, now)| *now);
        match (&self.scanner.cur, now) {
            (Cur::Num { .. }, Some(now)) => (now.known, now.ok),
            (Cur::None, now) if self.null.is_some() => {
                let starts = START_NUMBER_BYTES;
                match now {
                    Some(now) => (now.known & starts, now.ok & starts),
                    None => (starts, 0),
                }
            }
            _ => (0, 0),
        }
    }

    /// `f` on the number set and what is known of the literal so far; `None` when numbers
    /// cannot come.
    fn with_number<R>(&self, f: impl FnOnce(&NumSet, &[u8], &mut Next) -> R) -> Option<R> {
        let mut number = self.number.borrow_mut();
        let (set, _, now) = number.as_mut()?;
        Some(f(set, self.text(), now))
    }

    /// The verdict when it follows from the step's state without running the scanner: the
    /// scanner would make exactly this one check, and the token's other bytes cannot reach
    /// another ([`Scanner::quiet`] after the value).
    fn quick(&self, bytes: &[u8]) -> Option<bool> {
        match &self.scanner.cur {
            Cur::Num { .. } => match bytes {
                [b] if is_number_byte(*b) => {
                    self.with_number(|set, text, known| set.extends_with(text, *b, known))
                }
                [b, ..] if !is_number_byte(*b) && !self.after_value.reached_by(bytes) => {
                    self.with_number(|set, text, known| set.complete_with(text, known))
                }
                _ => None,
            },
            Cur::None => {
                let null = self.null?;
                let start = bytes.iter().position(|&b| !is_ws(b))?;
                match &bytes[start..] {
                    [b @ (b'-' | b'0'..=b'9')] => Some(
                        self.with_number(|set, text, known| set.extends_with(text, *b, known))
                            .unwrap_or(false),
                    ),
                    [b'n', rest @ ..] if !self.after_value.reached_by(rest) => Some(null),
                    // Inside the new object nothing is checked before a `:` (or a `,` with a
                    // list open), as between its values.
                    [b'{', rest @ ..] if !self.in_object().reached_by(rest) => self.object,
                    _ => None,
                }
            }
            _ => None,
        }
    }

    /// [`Scanner::quiet`] inside an object opened here.
    fn in_object(&self) -> Reach {
        match self.after_value {
            Reach::ColonComma => Reach::ColonComma,
            _ => Reach::Colon,
        }
    }

    /// Remembers in the number set what this step computed.
    pub fn finish(self) {
        if let Some((set, start, now)) = self.number.borrow_mut().take() {
            if now != start {
                set.remember(self.text(), now);
            }
        }
    }
}
