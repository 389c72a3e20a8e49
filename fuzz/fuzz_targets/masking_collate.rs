//! Label masking and collation over random token rows, spans and lengths: never a panic, and the
//! batch is exactly the rows' kept ends, labelled where and only where a span trains them.
#![no_main]

use libfuzzer_sys::arbitrary::{Result, Unstructured};
use libfuzzer_sys::fuzz_target;
use sft_dataset::batch::collate::{collate, Padding};
use sft_dataset::mask::truncation::{kept_window, Truncation};
use sft_dataset::mask::{
    chatml_assistant_spans, spans_from, spans_from_flags, trained_count, ChatMlMarkers,
    IGNORE_INDEX,
};
use sft_dataset::rows::packed_rows::PackedRows;
use sft_dataset::rows::{RowStats, RowView, TokenizedRow};

const IM_START: u32 = 1;
const IM_END: u32 = 2;
const ASSISTANT: u32 = 3;

/// Mostly a tiny alphabet so that marker sequences occur; sometimes any id a vocabulary may hold.
fn token(u: &mut Unstructured) -> Result<u32> {
    if u.ratio(1, 8)? {
        u.int_in_range(0..=i32::MAX as u32)
    } else {
        u.int_in_range(0..=7)
    }
}

fn check_spans(spans: &[std::ops::Range<u32>], len: usize) {
    for pair in spans.windows(2) {
        assert!(
            pair[0].end < pair[1].start,
            "spans overlap or touch: {spans:?}"
        );
    }
    for s in spans {
        assert!(
            s.start < s.end && s.end as usize <= len,
            "bad span {s:?} for {len} tokens"
        );
    }
}

fn run(u: &mut Unstructured) -> Result<()> {
    let mut newlines = Vec::new();
    for _ in 0..u.int_in_range(0..=2)? {
        newlines.push(u.int_in_range(4..=7)?);
    }
    let markers = ChatMlMarkers {
        im_start: IM_START,
        im_end: IM_END,
        assistant: if u.arbitrary()? {
            Some(ASSISTANT)
        } else {
            None
        },
        newlines,
    };
    let mut rows = Vec::new();
    for _ in 0..u.int_in_range(1..=6)? {
        let len = u.int_in_range(0..=96)?;
        let ids = (0..len).map(|_| token(u)).collect::<Result<Vec<u32>>>()?;
        let scan = u.ratio(1, 2)?;
        let spans = if scan {
            chatml_assistant_spans(&ids, &markers)
        } else if u.arbitrary()? {
            spans_from(u.int_in_range(0..=len + 2)?, len)
        } else {
            let flags = (0..len)
                .map(|_| u.arbitrary())
                .collect::<Result<Vec<bool>>>()?;
            spans_from_flags(&flags)
        };
        check_spans(&spans, len);
        if scan {
            // The assistant scan never trains an end marker, nor anything without a header.
            for s in spans.iter() {
                assert!(
                    !ids[s.start as usize..s.end as usize].contains(&IM_END),
                    "{ids:?}"
                );
            }
            if markers.assistant.is_none() {
                assert!(spans.is_empty());
            }
        }
        rows.push(TokenizedRow::new(
            ids.into(),
            spans.into(),
            None,
            RowStats::default(),
        ));
    }
    let max_seq_len = u.int_in_range(1..=128)?;
    let pad = token(u)?;
    let mode = if u.arbitrary()? {
        Truncation::KeepEnd
    } else {
        Truncation::KeepStart
    };
    let views: Vec<RowView> = rows.iter().map(TokenizedRow::view).collect();
    let padding = Padding {
        max_seq_len,
        multiple: 1,
        pad_id: pad,
        truncation: mode,
    };
    let batch = collate(&views, &padding);
    // The same rows packed, in blocks of a random split, collate to the same batch.
    let mut packed = PackedRows::default();
    let split = u.int_in_range(0..=rows.len())?;
    packed.push_rows(rows[..split].iter().cloned().map(Ok).collect());
    packed.push_rows(rows[split..].iter().cloned().map(Ok).collect());
    let unpacked: Vec<RowView> = (0..rows.len())
        .map(|i| packed.get(i).expect("packed rows are all built"))
        .collect();
    let again = collate(&unpacked, &padding);
    assert_eq!(
        (&again.input_ids, &again.labels),
        (&batch.input_ids, &batch.labels)
    );
    let longest = rows.iter().map(|r| r.ids.len()).max().unwrap_or(0);
    assert_eq!(batch.rows, rows.len());
    assert_eq!(batch.seq_len, longest.min(max_seq_len));
    assert_eq!(batch.input_ids.len(), rows.len() * batch.seq_len);
    assert_eq!(batch.labels.len(), batch.input_ids.len());
    for (b, row) in rows.iter().enumerate() {
        let window = kept_window(row.ids.len(), batch.seq_len, mode);
        let ids = &batch.input_ids[b * batch.seq_len..(b + 1) * batch.seq_len];
        let labels = &batch.labels[b * batch.seq_len..(b + 1) * batch.seq_len];
        let kept = window.len();
        for (k, pos) in window.clone().enumerate() {
            assert_eq!(ids[k], row.ids[pos] as i32);
            let trained = row.spans.iter().any(|s| s.contains(&(pos as u32)));
            assert_eq!(labels[k], if trained { ids[k] } else { IGNORE_INDEX });
        }
        assert!(ids[kept..].iter().all(|&id| id == pad as i32));
        assert!(labels[kept..].iter().all(|&l| l == IGNORE_INDEX));
        let counted = labels.iter().filter(|&&l| l != IGNORE_INDEX).count();
        assert_eq!(counted, trained_count(&row.spans, window));
    }
    Ok(())
}

fuzz_target!(|data: &[u8]| {
    let _ = run(&mut Unstructured::new(data));
});
