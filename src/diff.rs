//! Diffs of two texts: a short unified diff (for `generate --check`, `upgrade --dry-run` and
//! `edit`'s refusals), and the carry-over of a change to an edited copy (`edit`). The edit
//! script comes from `similar`.

use std::fmt::Write as _;

/// Lines of context around each change.
const CONTEXT: usize = 3;

/// The unified diff of `old` and `new` (labelled `path`), cut after `max_lines` lines. Hunks are
/// `similar`'s groups: changes with up to `CONTEXT` unchanged lines around them, and changes at
/// most `2 * CONTEXT` unchanged lines apart share a hunk.
pub fn unified(path: &str, old: &str, new: &str, max_lines: usize) -> String {
    let a: Vec<&str> = old.lines().collect();
    let b: Vec<&str> = new.lines().collect();
    let ops = similar::capture_diff_slices(similar::Algorithm::Myers, &a, &b);

    let mut out = format!("--- a/{path}\n+++ b/{path}\n");
    let mut budget = max_lines;
    for group in similar::group_diff_ops(ops, CONTEXT) {
        let (Some(first), Some(last)) = (group.first(), group.last()) else {
            continue;
        };
        let _ = writeln!(
            out,
            "@@ -{} +{} @@",
            HunkRange(first.old_range().start..last.old_range().end),
            HunkRange(first.new_range().start..last.new_range().end),
        );
        for change in group.iter().flat_map(|op| op.iter_changes(&a, &b)) {
            let Some(left) = budget.checked_sub(1) else {
                out.push_str("...\n");
                return out;
            };
            budget = left;
            let sign = match change.tag() {
                similar::ChangeTag::Equal => ' ',
                similar::ChangeTag::Delete => '-',
                similar::ChangeTag::Insert => '+',
            };
            let _ = writeln!(out, "{sign}{}", change.value());
        }
    }
    out
}

/// A side of a hunk header, `start,length` counted from 1. An empty side starts at the line
/// before the hunk, as diff and patch write it: `@@ -0,0 +1,2 @@` for a file that did not exist.
struct HunkRange(std::ops::Range<usize>);

impl std::fmt::Display for HunkRange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let Self(range) = self;
        let start = if range.is_empty() {
            range.start
        } else {
            range.start + 1
        };
        write!(f, "{start},{}", range.len())
    }
}

/// How closely `carry_over` must find the place of a change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// With unchanged lines on both sides of it (up to two, at least one each).
    Strict,
    /// Also with its unchanged lines on one side only, or, for lines it replaces, by those
    /// lines alone: `edit --force`, for a target whose lines next to the change were edited.
    Loose,
}

/// Carries the change from `old` to `new` over to `target`, a version of `old` that someone
/// edited, one changed run of lines (a hunk) at a time, touching no other line:
/// - a hunk whose old lines, with unchanged lines around them, occur in `target` exactly once
///   is applied there;
/// - a hunk whose new lines occur there already, where the old ones no longer do (the user
///   made the change by hand), is left as it is, so carrying a change over twice is carrying
///   it over once;
/// - any other hunk makes the whole call `None`, so that the caller can refuse rather than
///   guess.
pub fn carry_over(old: &str, new: &str, target: &str, placement: Placement) -> Option<String> {
    let a: Vec<&str> = old.split_inclusive('\n').collect();
    let b: Vec<&str> = new.split_inclusive('\n').collect();
    let mut text: Vec<&str> = target.split_inclusive('\n').collect();
    // From the last hunk to the first, so that the positions of earlier ones stay valid in `a`.
    for hunk in hunks(&a, &b).into_iter().rev() {
        if !hunk.carry(&a, &mut text, placement) {
            return None;
        }
    }
    Some(text.concat())
}

/// Lines of context a hunk is carried over with, at most.
const CARRY_CONTEXT: usize = 2;
/// The context a hunk is placed by, most first: lines on both sides.
const STRICT: [(usize, usize); 4] = [
    (CARRY_CONTEXT, CARRY_CONTEXT),
    (1, CARRY_CONTEXT),
    (CARRY_CONTEXT, 1),
    (1, 1),
];
/// With `Placement::Loose`, then: lines on one side only.
const ONE_SIDE: [(usize, usize); 4] = [(CARRY_CONTEXT, 0), (0, CARRY_CONTEXT), (1, 0), (0, 1)];

/// One changed run of lines: `old[start..end]` becomes `lines`.
struct Hunk<'a> {
    start: usize,
    end: usize,
    lines: Vec<&'a str>,
}

/// The hunks from `a` to `b`; hunks whose context would overlap are one hunk.
fn hunks<'a>(a: &[&'a str], b: &[&'a str]) -> Vec<Hunk<'a>> {
    let mut hunks: Vec<Hunk<'a>> = Vec::new();
    for op in similar::capture_diff_slices(similar::Algorithm::Myers, a, b) {
        let (tag, old, new) = op.as_tag_tuple();
        if tag == similar::DiffTag::Equal {
            continue;
        }
        let lines = b[new].to_vec();
        match hunks.last_mut() {
            // Their context would overlap.
            Some(last) if old.start.saturating_sub(CARRY_CONTEXT) < last.end + CARRY_CONTEXT => {
                last.lines.extend(&a[last.end..old.start]);
                last.lines.extend(lines);
                last.end = old.end;
            }
            _ => hunks.push(Hunk {
                start: old.start,
                end: old.end,
                lines,
            }),
        }
    }
    hunks
}

/// Where `needle` occurs in `text`.
fn places(text: &[&str], needle: &[&str]) -> Vec<usize> {
    if needle.is_empty() || text.len() < needle.len() {
        return Vec::new();
    }
    (0..=text.len() - needle.len())
        .filter(|&at| text[at..at + needle.len()] == *needle)
        .collect()
}

/// A hunk with context lines from `old`: where they start and end in `old`, and its old and
/// new sides.
struct Needle<'a> {
    before: usize,
    after: usize,
    old_side: Vec<&'a str>,
    new_side: Vec<&'a str>,
}

impl<'a> Hunk<'a> {
    /// The hunk with `above` and `below` lines of context from `a`.
    fn needle(&self, a: &[&'a str], (above, below): (usize, usize)) -> Needle<'a> {
        let before = self.start.saturating_sub(above);
        let after = (self.end + below).min(a.len());
        let mut new_side: Vec<&str> = a[before..self.start].to_vec();
        new_side.extend(&self.lines);
        new_side.extend(&a[self.end..after]);
        Needle {
            before,
            after,
            old_side: a[before..after].to_vec(),
            new_side,
        }
    }

    /// Applies the hunk to `text` where its old side occurs exactly once, or finds it made by
    /// hand already; `false` when it is neither.
    fn carry(&self, a: &[&'a str], text: &mut Vec<&'a str>, placement: Placement) -> bool {
        let mut contexts: Vec<(usize, usize)> = STRICT.to_vec();
        if placement == Placement::Loose {
            contexts.extend(ONE_SIDE);
            // Lines it replaces are a place of their own (an insertion replaces none, and an
            // empty needle has no place).
            contexts.push((0, 0));
        }
        let found = contexts.iter().find_map(|&context| {
            let needle = self.needle(a, context);
            // Strict placement needs context: at least the start or the end of the file.
            let bare = needle.before == self.start && needle.after == self.end;
            if placement == Placement::Strict && bare {
                return None;
            }
            match places(text, &needle.old_side)[..] {
                [at] => Some((at, needle)),
                _ => None,
            }
        });
        if let Some((at, needle)) = found {
            text.splice(at..at + needle.old_side.len(), needle.new_side);
            return true;
        }
        self.made_by_hand(a, text)
    }

    /// Whether the new side is in `text` and the old side is not. Context on one side, or none,
    /// counts only with new lines in the needle: the context of a deletion alone says nothing.
    fn made_by_hand(&self, a: &[&'a str], text: &[&str]) -> bool {
        let mut contexts: Vec<(usize, usize)> = STRICT.to_vec();
        if !self.lines.is_empty() {
            contexts.extend(ONE_SIDE);
            contexts.push((0, 0));
        }
        contexts.into_iter().any(|context| {
            let needle = self.needle(a, context);
            !places(text, &needle.new_side).is_empty()
                && (needle.old_side.is_empty() || places(text, &needle.old_side).is_empty())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::{Placement, carry_over};

    fn strict(old: &str, new: &str, target: &str) -> Option<String> {
        carry_over(old, new, target, Placement::Strict)
    }

    /// Asserts what the change from `old` to `new` makes of `target`.
    #[track_caller]
    fn carried(old: &str, new: &str, target: &str, want: Option<&str>) {
        assert_eq!(strict(old, new, target).as_deref(), want, "{target:?}");
    }

    /// A change is carried over to a copy edited elsewhere, and next to lines inserted by
    /// hand, with less context.
    #[test]
    fn a_change_is_carried_over_to_an_edited_copy() {
        for (old, new, edited, want) in [
            (
                "a\nb\nc\nd\ne\nf\ng\nh\n",
                "a\nb\nc\nD\ne\nf\ng\nh\ni\n",
                "x\na\nb\nc\nd\ne\nf\ny\ng\nh\n",
                "x\na\nb\nc\nD\ne\nf\ny\ng\nh\ni\n",
            ),
            (
                "a\nb\nc\nd\ne\n",
                "a\nb\nc\nX\nd\ne\n",
                "a\nINSERTED\nb\nc\nd\nMORE\ne\n",
                "a\nINSERTED\nb\nc\nX\nd\nMORE\ne\n",
            ),
        ] {
            carried(old, new, edited, Some(want));
        }
    }

    #[test]
    fn a_change_whose_context_was_edited_or_repeats_is_not_carried_over() {
        let old = "a\nb\nc\nd\ne\n";
        let new = "a\nb\nC\nd\ne\n";
        carried(old, new, "a\nB\nc\nd\ne\n", None);
        carried(old, new, "a\nb\nc\nd\ne\na\nb\nc\nd\ne\n", None);
        carried(old, new, old, Some(new));
    }

    #[test]
    fn a_change_made_by_hand_is_left_as_it_is() {
        let old = "a\nb\nc\nd\ne\nf\n";
        let new = "a\nb\nc\nX\nY\nd\ne\nf\n";
        // Where the diff shows it, and carried over once already.
        carried(old, new, new, Some(new));
        let moved = "a\nb\nc\nX\nY\nd\nE\nf\n";
        carried(old, new, moved, Some(moved));
        let once = strict(old, new, "z\na\nb\nc\nd\ne\nf\n").unwrap();
        assert_eq!(strict(old, new, &once), Some(once));
        // A replacement is made only when the old line is gone.
        let (old, new) = (
            "a\nb\nkind: ClusterRole\nd\ne\n",
            "a\nb\nkind: Role\nd\ne\n",
        );
        let by_hand = "a\nB\nkind: Role\nd\nE\n";
        carried(old, new, by_hand, Some(by_hand));
        carried(old, new, "a\nB\nkind: ClusterRole\nkind: Role\nE\n", None);
        // A deletion counts as made only where its context on both sides meets.
        let (old, new) = ("a\nb\nX\nd\ne\n", "a\nb\nd\ne\n");
        carried(old, new, "a\nb\nd\ne\n", Some(new));
        carried(old, new, "a\nb\nX edited\nd\ne\n", None);
    }

    #[test]
    fn a_change_at_either_end_of_the_file_is_placed_by_its_context_on_one_side() {
        let old = "a\nb\nc\nd\n";
        carried(
            old,
            "A\nb\nc\nd\n",
            "a\nb\nc\nd\nx\n",
            Some("A\nb\nc\nd\nx\n"),
        );
        carried(
            old,
            "a\nb\nc\nD\n",
            "x\na\nb\nc\nd\n",
            Some("x\na\nb\nc\nD\n"),
        );
        // Context that is the whole target.
        carried("a\nb\nc\n", "a\nB\nc\n", "a\nb\nc\n", Some("a\nB\nc\n"));
        // A change of the whole file has no context to be placed by.
        carried("a\n", "b\n", "x\na\ny\n", None);
        assert_eq!(
            carry_over("a\n", "b\n", "x\na\ny\n", Placement::Loose).as_deref(),
            Some("x\nb\ny\n")
        );
    }

    #[test]
    fn an_insertion_has_no_place_of_its_own() {
        // Loose placement finds a replaced line by itself, but an insertion only by context.
        let (old, new) = ("a\nb\nc\n", "a\nb\nX\nc\n");
        assert_eq!(carry_over(old, new, "z\n", Placement::Loose), None);
        assert_eq!(
            carry_over(old, new, "q\nb\nr\n", Placement::Loose).as_deref(),
            Some("q\nb\nX\nr\n")
        );
    }

    #[test]
    fn loose_placement_takes_context_on_one_side_and_touches_only_the_change() {
        let old = "env:\n- name: A\n  value: a\nports:\n- 80\n";
        let new = "env:\n- name: A\n  value: a\n- name: W\n  value: w\nports:\n- 80\n";
        // The user's own variable sits where the change goes, and their port was changed.
        let target = "env:\n- name: A\n  value: a\n- name: MINE\n  value: m\nports:\n- 81\n";
        carried(old, new, target, None);
        assert_eq!(
            carry_over(old, new, target, Placement::Loose).as_deref(),
            Some(
                "env:\n- name: A\n  value: a\n- name: W\n  value: w\n- name: MINE\n  value: m\nports:\n- 81\n"
            )
        );
        // Lines it replaces are found by themselves.
        let (old, new) = (
            "a\nb\nkind: ClusterRole\nd\ne\n",
            "a\nb\nkind: Role\nd\ne\n",
        );
        assert_eq!(
            carry_over(old, new, "A\nkind: ClusterRole\nE\n", Placement::Loose).as_deref(),
            Some("A\nkind: Role\nE\n")
        );
        // Nowhere to go: still refused.
        assert_eq!(carry_over(old, new, "A\nE\n", Placement::Loose), None);
    }

    use super::*;

    #[test]
    fn an_empty_side_has_the_header_patch_expects() {
        assert_eq!(
            unified("f", "", "a\nb\n", 40),
            "--- a/f\n+++ b/f\n@@ -0,0 +1,2 @@\n+a\n+b\n"
        );
        assert_eq!(
            unified("f", "a\n", "", 40),
            "--- a/f\n+++ b/f\n@@ -1,1 +0,0 @@\n-a\n"
        );
    }

    #[test]
    fn shows_changes_with_context() {
        let old = "a\nb\nc\nd\ne\nf\ng\nh\n";
        let new = "a\nb\nc\nD\ne\nf\ng\nh\ni\n";
        assert_eq!(
            unified("x.yaml", old, new, 100),
            "--- a/x.yaml\n+++ b/x.yaml\n@@ -1,8 +1,9 @@\n a\n b\n c\n-d\n+D\n e\n f\n g\n h\n+i\n"
        );
    }

    #[test]
    fn distant_changes_get_their_own_hunks_and_long_diffs_are_cut() {
        let old: String = (0..30).map(|i| format!("{i}\n")).collect();
        let new: String = (0..30)
            .map(|i| match i {
                2 => "two\n".to_owned(),
                25 => "twenty-five\n".to_owned(),
                i => format!("{i}\n"),
            })
            .collect();
        let diff = unified("x", &old, &new, 100);
        assert_eq!(diff.matches("@@ ").count(), 2, "{diff}");
        let cut = unified("x", &old, &new, 3);
        assert!(cut.ends_with("...\n"), "{cut}");
        assert_eq!(unified("x", "same\n", "same\n", 10), "--- a/x\n+++ b/x\n");
    }

    #[test]
    fn changes_six_unchanged_lines_apart_share_a_hunk_and_seven_apart_do_not() {
        let old: String = (0..16).map(|i| format!("{i}\n")).collect();
        let six_apart = old.replace("\n2\n", "\ntwo\n").replace("\n9\n", "\nnine\n");
        assert_eq!(
            unified("x", &old, &six_apart, 100),
            "--- a/x\n+++ b/x\n@@ -1,13 +1,13 @@\n 0\n 1\n-2\n+two\n 3\n 4\n 5\n 6\n 7\n 8\n-9\n+nine\n 10\n 11\n 12\n"
        );
        let seven_apart = old.replace("\n2\n", "\ntwo\n").replace("\n10\n", "\nten\n");
        assert_eq!(
            unified("x", &old, &seven_apart, 100),
            "--- a/x\n+++ b/x\n@@ -1,6 +1,6 @@\n 0\n 1\n-2\n+two\n 3\n 4\n 5\n@@ -8,7 +8,7 @@\n 7\n 8\n 9\n-10\n+ten\n 11\n 12\n 13\n"
        );
    }

    #[test]
    fn a_diff_is_cut_only_when_lines_are_left_over() {
        let (old, new) = ("a\nb\nc\n", "a\nB\nc\n");
        let head = "--- a/x\n+++ b/x\n@@ -1,3 +1,3 @@\n";
        assert_eq!(unified("x", old, new, 4), format!("{head} a\n-b\n+B\n c\n"));
        assert_eq!(
            unified("x", old, new, 3),
            format!("{head} a\n-b\n+B\n...\n")
        );
        assert_eq!(unified("x", old, new, 0), format!("{head}...\n"));
    }

    #[test]
    fn changes_closer_than_twice_the_carried_context_are_one_hunk() {
        // The hunks from ten numbered lines to `new`, as (start, end, new lines).
        let hunks_to = |new: &'static str| -> Vec<(usize, usize, Vec<&'static str>)> {
            let a: Vec<&str> = "0\n1\n2\n3\n4\n5\n6\n7\n8\n9\n"
                .split_inclusive('\n')
                .collect();
            let b: Vec<&str> = new.split_inclusive('\n').collect();
            hunks(&a, &b)
                .into_iter()
                .map(|h| (h.start, h.end, h.lines))
                .collect()
        };
        assert_eq!(
            hunks_to("0\n1\ntwo\n3\n4\n5\nsix\n7\n8\n9\n"),
            [(2, 7, vec!["two\n", "3\n", "4\n", "5\n", "six\n"])]
        );
        assert_eq!(
            hunks_to("0\n1\ntwo\n3\n4\n5\n6\nseven\n8\nnine\n"),
            [
                (2, 3, vec!["two\n"]),
                (7, 10, vec!["seven\n", "8\n", "nine\n"])
            ]
        );
        // An insertion takes no old line.
        assert_eq!(
            hunks_to("0\n1\nnew\n2\n3\n4\n5\n6\n7\n8\n9\n"),
            [(2, 2, vec!["new\n"])]
        );
    }

    #[test]
    fn large_files_stay_cheap() {
        let old: String = (0..50_000).map(|i| format!("line {i}\n")).collect();
        let new = old.replace("line 25000\n", "changed\n");
        let diff = unified("big", &old, &new, 100);
        assert!(diff.contains("-line 25000\n+changed\n"), "{diff}");
        let reversed: String = (0..5_000).rev().map(|i| format!("line {i}\n")).collect();
        let diff = unified(
            "big",
            &old[..old.find("line 5000\n").unwrap()],
            &reversed,
            5,
        );
        assert!(diff.ends_with("...\n"), "{diff}");
    }
}
