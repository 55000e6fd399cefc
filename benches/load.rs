//! Loading a `tradedesk-book/1` file from its text: JSON parse, every rule of
//! docs/methodology/book-format.md, and the replay order, over the generated history of
//! `benches/common` at 20,000 and 1,000,000 fills (`cargo bench --bench load`).

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use std::hint::black_box;
use tradedesk_brokers::parse_book;

mod common;

fn load(c: &mut Criterion) {
    let mut group = c.benchmark_group("load");
    group.sample_size(10);
    for n in [20_000usize, 1_000_000] {
        let json = common::to_json(&common::generate(n));
        group.throughput(Throughput::Elements(n as u64));
        group.bench_with_input(BenchmarkId::new("parse_book", n), &json, |b, json| {
            b.iter(|| black_box(parse_book("bench", json).map(|book| book.fills.len())));
        });
        // The path-naming validator alone: what every load ran before the typed pass.
        group.bench_with_input(BenchmarkId::new("validator_only", n), &json, |b, json| {
            b.iter(|| {
                black_box(
                    tradedesk_brokers::book::parse_book_validating("bench", json)
                        .map(|book| book.fills.len()),
                )
            });
        });
    }
    group.finish();
}

criterion_group!(benches, load);
criterion_main!(benches);
