//! Plurals as kubebuilder computes them: flect v1.0.3's English rules applied to the lowercased
//! kind. Keeping kubebuilder's plurals means a kind gets the same resource name, CRD name and
//! RBAC rules in both tools.
//!
//! Order of precedence: a whole-word dictionary entry; a word that is already a known plural;
//! then the first rule whose suffix matches, where dictionary words (as compound suffixes, the
//! later ones first) come before the suffix rules (the earlier ones first), and every rule's
//! plural suffix is kept as it is; last, a word ending in `s` is kept and any other gets `s`.

/// One dictionary word: its plural, whether it is matched only as a whole word, and another
/// plural that is kept as it is.
struct Word {
    singular: &'static str,
    plural: &'static str,
    exact: bool,
    alternative: Option<&'static str>,
}

const fn word(singular: &'static str, plural: &'static str) -> Word {
    Word {
        singular,
        plural,
        exact: false,
        alternative: None,
    }
}

const fn exact(singular: &'static str, plural: &'static str) -> Word {
    Word {
        exact: true,
        ..word(singular, plural)
    }
}

const fn or(singular: &'static str, plural: &'static str, alternative: &'static str) -> Word {
    Word {
        alternative: Some(alternative),
        ..word(singular, plural)
    }
}

/// Irregular, identical and uncountable words.
const DICTIONARY: &[Word] = &[
    word("aircraft", "aircraft"),
    or("beef", "beef", "beefs"),
    word("bison", "bison"),
    word("blues", "blues"),
    word("chassis", "chassis"),
    word("deer", "deer"),
    or("fish", "fish", "fishes"),
    word("moose", "moose"),
    word("police", "police"),
    or("salmon", "salmon", "salmons"),
    word("series", "series"),
    word("sheep", "sheep"),
    or("shrimp", "shrimp", "shrimps"),
    word("species", "species"),
    or("swine", "swine", "swines"),
    or("trout", "trout", "trouts"),
    or("tuna", "tuna", "tunas"),
    word("you", "you"),
    word("child", "children"),
    exact("ox", "oxen"),
    word("foot", "feet"),
    word("goose", "geese"),
    word("man", "men"),
    word("human", "humans"),
    exact("louse", "lice"),
    word("mouse", "mice"),
    word("tooth", "teeth"),
    word("woman", "women"),
    exact("die", "dice"),
    word("person", "people"),
    or("adieu", "adieux", "adieus"),
    word("fabliau", "fabliaux"),
    or("bureau", "bureaus", "bureaux"),
    word("criterion", "criteria"),
    or("ganglion", "ganglia", "ganglions"),
    or("lexicon", "lexica", "lexicons"),
    or("mitochondrion", "mitochondria", "mitochondrions"),
    word("noumenon", "noumena"),
    word("phenomenon", "phenomena"),
    word("taxon", "taxa"),
    word("media", "media"),
    word("medium", "media"),
    or("stadium", "stadiums", "stadia"),
    or("aquarium", "aquaria", "aquariums"),
    or("auditorium", "auditoria", "auditoriums"),
    or("symposium", "symposia", "symposiums"),
    or("curriculum", "curriculums", "curricula"),
    word("quota", "quotas"),
    or("alumnus", "alumni", "alumnuses"),
    word("bacillus", "bacilli"),
    or("cactus", "cacti", "cactuses"),
    word("coccus", "cocci"),
    or("focus", "foci", "focuses"),
    or("locus", "loci", "locuses"),
    or("nucleus", "nuclei", "nucleuses"),
    or("octopus", "octupuses", "octopi"),
    or("radius", "radii", "radiuses"),
    word("syllabus", "syllabi"),
    or("corpus", "corpora", "corpuses"),
    word("genus", "genera"),
    word("alumna", "alumnae"),
    word("vertebra", "vertebrae"),
    word("differentia", "differentiae"),
    word("minutia", "minutiae"),
    word("vita", "vitae"),
    word("larva", "larvae"),
    word("postcava", "postcavae"),
    word("praecava", "praecavae"),
    word("uva", "uvae"),
    or("apex", "apices", "apexes"),
    or("codex", "codices", "codexes"),
    or("index", "indices", "indexes"),
    or("latex", "latices", "latexes"),
    or("vertex", "vertices", "vertexes"),
    or("vortex", "vortices", "vortexes"),
    or("appendix", "appendices", "appendixes"),
    or("radix", "radices", "radixes"),
    or("helix", "helices", "helixes"),
    exact("axis", "axes"),
    word("crisis", "crises"),
    word("ellipsis", "ellipses"),
    word("genesis", "geneses"),
    word("oasis", "oases"),
    word("thesis", "theses"),
    word("testis", "testes"),
    word("base", "bases"),
    word("basis", "bases"),
    exact("alias", "aliases"),
    word("vedalia", "vedalias"),
    exact("use", "uses"),
    word("abuse", "abuses"),
    word("cause", "causes"),
    word("clause", "clauses"),
    word("cruse", "cruses"),
    word("excuse", "excuses"),
    word("fuse", "fuses"),
    word("house", "houses"),
    word("misuse", "misuses"),
    word("muse", "muses"),
    word("pause", "pauses"),
    word("ache", "aches"),
    word("topaz", "topazes"),
    or("buffalo", "buffaloes", "buffalos"),
    word("potato", "potatoes"),
    word("tomato", "tomatoes"),
    word("equipment", "equipment"),
    word("information", "information"),
    word("jeans", "jeans"),
    word("money", "money"),
    word("news", "news"),
    word("rice", "rice"),
    or("dwarf", "dwarfs", "dwarves"),
    or("hoof", "hoofs", "hooves"),
    word("thief", "thieves"),
    word("chive", "chives"),
    word("hive", "hives"),
    word("move", "moves"),
    word("movie", "movies"),
    word("cookie", "cookies"),
    word("pretorium", "pretoriums"),
    word("agenda", "agendas"),
    or("formula", "formulas", "formulae"),
    word("shoe", "shoes"),
    exact("toe", "toes"),
    word("graffiti", "graffiti"),
    exact("id", "ids"),
];

/// Suffix rules, the earlier ones first: singular suffix, plural suffix.
const SUFFIXES: &[(&str, &str)] = &[
    ("tive", "tives"),
    ("eaf", "eaves"),
    ("oaf", "oaves"),
    ("afe", "aves"),
    ("arf", "arves"),
    ("rfe", "rves"),
    ("rf", "rves"),
    ("lf", "lves"),
    ("fe", "ves"),
    ("ay", "ays"),
    ("ey", "eys"),
    ("oy", "oys"),
    ("quy", "quies"),
    ("uy", "uys"),
    ("y", "ies"),
    ("eau", "eaux"),
    ("bula", "bulae"),
    ("dula", "bulae"),
    ("lula", "bulae"),
    ("nula", "bulae"),
    ("vula", "bulae"),
    ("hedron", "hedra"),
    ("ium", "ia"),
    ("seum", "seums"),
    ("eum", "ea"),
    ("oum", "oa"),
    ("stracum", "straca"),
    ("dum", "da"),
    ("elum", "ela"),
    ("ilum", "ila"),
    ("olum", "ola"),
    ("ulum", "ula"),
    ("llum", "lla"),
    ("ylum", "yla"),
    ("imum", "ima"),
    ("ernum", "erna"),
    ("gnum", "gna"),
    ("brum", "bra"),
    ("crum", "cra"),
    ("terum", "tera"),
    ("serum", "sera"),
    ("trum", "tra"),
    ("antum", "anta"),
    ("atum", "ata"),
    ("entum", "enta"),
    ("etum", "eta"),
    ("itum", "ita"),
    ("otum", "ota"),
    ("utum", "uta"),
    ("ctum", "cta"),
    ("ovum", "ova"),
    ("trix", "trices"),
    ("iasis", "iases"),
    ("mesis", "meses"),
    ("kinesis", "kineses"),
    ("resis", "reses"),
    ("gnosis", "gnoses"),
    ("opsis", "opses"),
    ("ysis", "yses"),
    ("ouse", "ouses"),
    ("lause", "lauses"),
    ("us", "uses"),
    ("ch", "ches"),
    ("io", "ios"),
    ("sh", "shes"),
    ("ss", "sses"),
    ("ez", "ezzes"),
    ("iz", "izzes"),
    ("tz", "tzes"),
    ("zz", "zzes"),
    ("ano", "anos"),
    ("lo", "los"),
    ("to", "tos"),
    ("oo", "oos"),
    ("o", "oes"),
    ("x", "xes"),
];

/// The plural of a kind, as kubebuilder computes it: `AppOTP` → `appotps`, `Policy` →
/// `policies`, `Person` → `people`.
pub fn plural(kind: &str) -> String {
    let word = kind.to_lowercase();
    if let Some(entry) = DICTIONARY.iter().find(|entry| entry.singular == word) {
        return entry.plural.to_owned();
    }
    let known_plural = DICTIONARY
        .iter()
        .any(|entry| entry.plural == word || entry.alternative == Some(word.as_str()));
    if known_plural {
        return word;
    }
    let compound = DICTIONARY
        .iter()
        .rev()
        .filter(|entry| !entry.exact)
        .map(|entry| (entry.singular, entry.plural));
    for (singular, plural) in compound.chain(SUFFIXES.iter().copied()) {
        if word.ends_with(plural) {
            return word;
        }
        if let Some(stem) = word.strip_suffix(singular) {
            // A rule that would replace the whole word by letters it does not start with
            // (`Y` → `ies`) leaves nothing of the kind in its plural: such a word takes `s`.
            if stem.is_empty() && !plural.starts_with(singular) {
                break;
            }
            return format!("{stem}{plural}");
        }
    }
    if word.ends_with('s') {
        word
    } else {
        word + "s"
    }
}

#[cfg(test)]
mod tests {
    use super::plural;

    /// Kinds and the plurals kubebuilder gives them.
    const KINDS: &[(&str, &str)] = &[
        ("AppOTP", "appotps"),
        ("Y", "ys"),
        ("X", "xes"),
        ("O", "oes"),
        ("Policy", "policies"),
        ("Ingress", "ingresses"),
        ("Status", "statuses"),
        ("Proxy", "proxies"),
        ("Bus", "buses"),
        ("Child", "children"),
        ("Person", "people"),
        ("Datum", "data"),
        ("Index", "indices"),
        ("Man", "men"),
        ("Fish", "fish"),
        ("Series", "series"),
        ("Analysis", "analyses"),
        ("Address", "addresses"),
        ("Class", "classes"),
        ("Gateway", "gateways"),
        ("Busybox", "busyboxes"),
        ("Matrix", "matrices"),
        ("Leaf", "leaves"),
        ("Redis", "redis"),
        ("Postgres", "postgres"),
        ("Memcached", "memcacheds"),
        ("HelloWorld", "helloworlds"),
        ("FunctionBuild", "functionbuilds"),
        ("DNS", "dns"),
        ("Captain", "captains"),
        ("FirstMate", "firstmates"),
        ("Admiral", "admirals"),
        ("Sailor", "sailors"),
        ("Database", "databases"),
        ("Fireman", "firemen"),
        ("Human", "humans"),
        ("Knife", "knives"),
        ("Elf", "elves"),
        ("Key", "keys"),
        ("Guy", "guys"),
        ("Quiz", "quizzes"),
        ("Photo", "photos"),
        ("Hero", "heroes"),
        ("Radio", "radios"),
        ("Potato", "potatoes"),
        ("Criterion", "criteria"),
        ("Medium", "media"),
        ("Cactus", "cacti"),
        ("Virus", "viruses"),
        ("Mouse", "mice"),
        ("Blouse", "blouses"),
        ("Ox", "oxen"),
        // Plurals, of whole-word entries and alternative ones, are kept.
        ("Oxen", "oxen"),
        ("Lice", "lice"),
        ("Octopi", "octopi"),
        ("Formulae", "formulae"),
        ("Adieus", "adieus"),
        ("Box", "boxes"),
        ("Mailbox", "mailboxes"),
        ("Alias", "aliases"),
        ("Settings", "settings"),
        ("Data", "data"),
        ("People", "people"),
        ("Certificate", "certificates"),
        ("CronJob", "cronjobs"),
        ("BackupPolicy", "backuppolicies"),
        ("Museum", "museums"),
        ("Movie", "movies"),
        ("Chief", "chiefs"),
        ("Watch", "watches"),
        ("Mesh", "meshes"),
        ("Waltz", "waltzes"),
        ("Loop", "loops"),
        ("Client", "clients"),
    ];

    #[test]
    fn plurals_match_kubebuilder() {
        assert!(KINDS.len() >= 40);
        let wrong: Vec<String> = KINDS
            .iter()
            .filter(|(kind, want)| plural(kind) != *want)
            .map(|(kind, want)| format!("{kind}: got {}, want {want}", plural(kind)))
            .collect();
        assert!(wrong.is_empty(), "{wrong:#?}");
    }
}
