//! Dynamic batching: which requests of one `execute` call run together (concatenated along
//! the batch dim), and where each one's rows lie in the batch.

/// What grouping needs to know of a request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Item {
    /// Its batch size.
    pub batch: usize,
    /// Every input's shape without the batch dim: requests run together only when these
    /// agree.
    pub rest: Vec<Vec<usize>>,
    /// Whether its data is all in host memory (device data runs alone, where it lies).
    pub host: bool,
}

/// Groups of request indices, in order: consecutive requests of equal `rest`, in host
/// memory, whose batches add up to at most `max_batch`. `None` items (requests already
/// answered) are left out; with `max_batch` 0 every request runs alone.
pub fn groups(items: &[Option<Item>], max_batch: usize) -> Vec<Vec<usize>> {
    let mut out: Vec<Vec<usize>> = Vec::new();
    let mut open: Option<(usize, &Item)> = None;
    for (i, item) in items.iter().enumerate() {
        let Some(item) = item else { continue };
        let joins = match open {
            Some((rows, first)) => {
                max_batch > 0
                    && item.host
                    && first.host
                    && first.rest == item.rest
                    && rows + item.batch <= max_batch
            }
            None => false,
        };
        if let (true, Some(group), Some((rows, _))) = (joins, out.last_mut(), open.as_mut()) {
            group.push(i);
            *rows += item.batch;
            continue;
        }
        out.push(vec![i]);
        open = Some((item.batch, item));
    }
    out
}

/// Row offsets of each batch in their concatenation, and the total.
pub fn offsets(batches: &[usize]) -> (Vec<usize>, usize) {
    let mut at = 0;
    let offsets = batches
        .iter()
        .map(|b| {
            let o = at;
            at += b;
            o
        })
        .collect();
    (offsets, at)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(batch: usize, rest: usize, host: bool) -> Option<Item> {
        Some(Item {
            batch,
            rest: vec![vec![3, rest]],
            host,
        })
    }

    #[test]
    fn consecutive_compatible_requests_share_a_batch_up_to_the_max() {
        let items = vec![
            item(2, 8, true),
            item(3, 8, true),
            None,
            item(4, 8, true),
            item(1, 9, true),
            item(1, 9, false),
            item(1, 9, true),
        ];
        assert_eq!(
            groups(&items, 8),
            vec![vec![0, 1], vec![3], vec![4], vec![5], vec![6]]
        );
        assert_eq!(
            groups(&items, 16),
            vec![vec![0, 1, 3], vec![4], vec![5], vec![6]]
        );
        assert_eq!(groups(&items, 0).len(), 6);
    }

    #[test]
    fn offsets_follow_the_batches() {
        assert_eq!(offsets(&[2, 3, 1]), (vec![0, 2, 5], 6));
        assert_eq!(offsets(&[]), (vec![], 0));
    }
}
