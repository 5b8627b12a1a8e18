use contract_core::Contract;

#[derive(Contract)]
struct Quote<'a> {
    text: &'a str,
}

fn main() {}
