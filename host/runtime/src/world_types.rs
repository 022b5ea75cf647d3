//! Upload checks types, not only names: the interface a component exports is
//! compared, function by function and type by type, with the world this host
//! serves. Without it a component exporting the right interface name with a
//! wrong signature would be stored and only refused when bound.
//!
//! The component's own WIT is decoded from its type section (no compile, so
//! an 18 MB component built from Python is checked in milliseconds) and held
//! against the WIT this binary was built with. The rules follow the
//! component model's subtyping as wasmtime applies it when linking: every
//! function of the served interface must be there with the same parameter
//! and result types; names of record fields, variant and enum cases and flags
//! count, parameter names do not; extra exports are allowed.

use std::sync::OnceLock;

use wit_parser::decoding::{DecodedWasm, decode};
use wit_parser::{
    Function, Handle, Interface, InterfaceId, Resolve, SourceMap, Type, TypeDefKind, WorldItem,
};

use crate::error::LoadError;

/// The WIT packages this host serves, in dependency order.
const SERVED_WIT: &[(&str, &[(&str, &str)])] = &[
    (
        "plugin@0.1.0",
        &[(
            "plugin.wit",
            include_str!("../../../wit/deps/plugin@0.1.0/plugin.wit"),
        )],
    ),
    (
        "policy@0.1.0",
        &[(
            "policy.wit",
            include_str!("../../../wit/deps/policy@0.1.0/policy.wit"),
        )],
    ),
    (
        "policy@0.2.0",
        &[(
            "policy.wit",
            include_str!("../../../wit/deps/policy@0.2.0/policy.wit"),
        )],
    ),
    (
        "grant@0.1.0",
        &[(
            "grant.wit",
            include_str!("../../../wit/deps/grant@0.1.0/grant.wit"),
        )],
    ),
    (
        "carrier@0.1.0",
        &[
            (
                "carrier.wit",
                include_str!("../../../wit/deps/carrier@0.1.0/carrier.wit"),
            ),
            (
                "tunnel.wit",
                include_str!("../../../wit/deps/carrier@0.1.0/tunnel.wit"),
            ),
        ],
    ),
    (
        "carrier@0.2.0",
        &[(
            "tunnel.wit",
            include_str!("../../../wit/deps/carrier@0.2.0/tunnel.wit"),
        )],
    ),
    (
        "carrier@0.3.0",
        &[(
            "carrier.wit",
            include_str!("../../../wit/deps/carrier@0.3.0/carrier.wit"),
        )],
    ),
    (
        "carrier@0.4.0",
        &[(
            "carrier.wit",
            include_str!("../../../wit/deps/carrier@0.4.0/carrier.wit"),
        )],
    ),
];

fn served() -> &'static Resolve {
    static SERVED: OnceLock<Resolve> = OnceLock::new();
    SERVED.get_or_init(|| {
        let mut resolve = Resolve::default();
        for (package, files) in SERVED_WIT {
            let mut map = SourceMap::default();
            for (file, text) in *files {
                map.push_str(&format!("{package}/{file}"), *text);
            }
            let group = map
                .parse()
                .unwrap_or_else(|(_, e)| panic!("the built-in WIT {package} parses: {e}"));
            resolve
                .push_group(group)
                .unwrap_or_else(|e| panic!("the built-in WIT {package} resolves: {e}"));
        }
        resolve
    })
}

/// Checks that the component's export `export` (an interface id such as
/// `switchyard:policy/admission@0.1.0`) has the types this host serves.
pub(crate) fn check_export(bytes: &[u8], export: &str) -> Result<(), LoadError> {
    let mismatch = |detail: String| LoadError::WorldMismatch {
        export: export.to_string(),
        detail,
    };
    let expected = served();
    let expected_id =
        find_interface(expected, export).expect("every served export is in the built-in WIT");
    let (found, world) = match decode(bytes) {
        Ok(DecodedWasm::Component(resolve, world)) => (resolve, world),
        Ok(DecodedWasm::WitPackage(..)) => {
            return Err(LoadError::InvalidComponent(
                "this is a WIT package, not a component".into(),
            ));
        }
        Err(e) => return Err(mismatch(format!("its types could not be read: {e:#}"))),
    };
    let found_id = found.worlds[world]
        .exports
        .values()
        .find_map(|item| match item {
            WorldItem::Interface { id, .. } if found.id_of(*id).as_deref() == Some(export) => {
                Some(*id)
            }
            _ => None,
        })
        .ok_or_else(|| mismatch("the export is not an interface".into()))?;
    let pair = Pair {
        expected,
        found: &found,
    };
    pair.interface(
        &expected.interfaces[expected_id],
        &found.interfaces[found_id],
    )
    .map_err(mismatch)
}

fn find_interface(resolve: &Resolve, name: &str) -> Option<InterfaceId> {
    resolve
        .interfaces
        .iter()
        .map(|(id, _)| id)
        .find(|id| resolve.id_of(*id).as_deref() == Some(name))
}

/// The served WIT and the component's, walked side by side.
struct Pair<'a> {
    expected: &'a Resolve,
    found: &'a Resolve,
}

impl Pair<'_> {
    fn interface(&self, expected: &Interface, found: &Interface) -> Result<(), String> {
        for (name, want) in &expected.functions {
            let Some(got) = found.functions.get(name) else {
                return Err(format!("function `{name}` is missing"));
            };
            self.function(want, got)
                .map_err(|e| format!("function `{name}`: {e}"))?;
        }
        Ok(())
    }

    fn function(&self, want: &Function, got: &Function) -> Result<(), String> {
        if want.params.len() != got.params.len() {
            return Err(format!(
                "takes {} parameter(s), the world has {}",
                got.params.len(),
                want.params.len()
            ));
        }
        for (w, g) in want.params.iter().zip(&got.params) {
            self.ty(w.ty, g.ty)
                .map_err(|e| format!("parameter `{}`: {e}", w.name))?;
        }
        self.optional(want.result, got.result)
            .map_err(|e| format!("result: {e}"))
    }

    fn optional(&self, want: Option<Type>, got: Option<Type>) -> Result<(), String> {
        match (want, got) {
            (None, None) => Ok(()),
            (Some(w), Some(g)) => self.ty(w, g),
            (w, g) => Err(self.differs(w, g)),
        }
    }

    fn ty(&self, want: Type, got: Type) -> Result<(), String> {
        let (want, got) = (unalias(self.expected, want), unalias(self.found, got));
        let (Type::Id(w), Type::Id(g)) = (want, got) else {
            return if want == got {
                Ok(())
            } else {
                Err(self.differs(Some(want), Some(got)))
            };
        };
        let (wk, gk) = (&self.expected.types[w].kind, &self.found.types[g].kind);
        let differs = || self.differs(Some(want), Some(got));
        match (wk, gk) {
            (TypeDefKind::Record(w), TypeDefKind::Record(g)) => {
                if w.fields.len() != g.fields.len() {
                    return Err(differs());
                }
                for (wf, gf) in w.fields.iter().zip(&g.fields) {
                    if wf.name != gf.name {
                        return Err(format!(
                            "record field `{}` where the world has `{}`",
                            gf.name, wf.name
                        ));
                    }
                    self.ty(wf.ty, gf.ty)
                        .map_err(|e| format!("record field `{}`: {e}", wf.name))?;
                }
                Ok(())
            }
            (TypeDefKind::Variant(w), TypeDefKind::Variant(g)) => {
                if w.cases.len() != g.cases.len() {
                    return Err(differs());
                }
                for (wc, gc) in w.cases.iter().zip(&g.cases) {
                    if wc.name != gc.name {
                        return Err(format!(
                            "variant case `{}` where the world has `{}`",
                            gc.name, wc.name
                        ));
                    }
                    self.optional(wc.ty, gc.ty)
                        .map_err(|e| format!("variant case `{}`: {e}", wc.name))?;
                }
                Ok(())
            }
            (TypeDefKind::Enum(w), TypeDefKind::Enum(g)) => {
                let names = |cases: &[wit_parser::EnumCase]| {
                    cases.iter().map(|c| c.name.clone()).collect::<Vec<_>>()
                };
                if names(&w.cases) == names(&g.cases) {
                    Ok(())
                } else {
                    Err(differs())
                }
            }
            (TypeDefKind::Flags(w), TypeDefKind::Flags(g)) => {
                let names = |flags: &[wit_parser::Flag]| {
                    flags.iter().map(|f| f.name.clone()).collect::<Vec<_>>()
                };
                if names(&w.flags) == names(&g.flags) {
                    Ok(())
                } else {
                    Err(differs())
                }
            }
            (TypeDefKind::Tuple(w), TypeDefKind::Tuple(g)) => {
                if w.types.len() != g.types.len() {
                    return Err(differs());
                }
                for (wt, gt) in w.types.iter().zip(&g.types) {
                    self.ty(*wt, *gt)?;
                }
                Ok(())
            }
            (TypeDefKind::Option(w), TypeDefKind::Option(g))
            | (TypeDefKind::List(w), TypeDefKind::List(g)) => {
                self.ty(*w, *g).map_err(|_| differs())
            }
            (TypeDefKind::Result(w), TypeDefKind::Result(g)) => self
                .optional(w.ok, g.ok)
                .and_then(|_| self.optional(w.err, g.err))
                .map_err(|_| differs()),
            // Resources are nominal: wasmtime matches them by identity when it
            // links, which a decoded copy cannot show; the shape is enough here.
            (TypeDefKind::Resource, TypeDefKind::Resource)
            | (TypeDefKind::Handle(Handle::Own(_)), TypeDefKind::Handle(Handle::Own(_)))
            | (TypeDefKind::Handle(Handle::Borrow(_)), TypeDefKind::Handle(Handle::Borrow(_))) => {
                Ok(())
            }
            _ => Err(differs()),
        }
    }

    fn differs(&self, want: Option<Type>, got: Option<Type>) -> String {
        format!(
            "the world has {}, the component {}",
            describe(self.expected, want),
            describe(self.found, got)
        )
    }
}

/// Follows `type a = b` to what it names.
fn unalias(resolve: &Resolve, mut ty: Type) -> Type {
    while let Type::Id(id) = ty {
        match resolve.types[id].kind {
            TypeDefKind::Type(inner) => ty = inner,
            _ => break,
        }
    }
    ty
}

/// A short WIT-like name for messages: `u32`, `option<u32>`, `record inference-request`.
fn describe(resolve: &Resolve, ty: Option<Type>) -> String {
    let Some(ty) = ty else {
        return "nothing".into();
    };
    match unalias(resolve, ty) {
        Type::Bool => "bool".into(),
        Type::U8 => "u8".into(),
        Type::U16 => "u16".into(),
        Type::U32 => "u32".into(),
        Type::U64 => "u64".into(),
        Type::S8 => "s8".into(),
        Type::S16 => "s16".into(),
        Type::S32 => "s32".into(),
        Type::S64 => "s64".into(),
        Type::F32 => "f32".into(),
        Type::F64 => "f64".into(),
        Type::Char => "char".into(),
        Type::String => "string".into(),
        Type::ErrorContext => "error-context".into(),
        Type::Id(id) => {
            let def = &resolve.types[id];
            match (&def.kind, &def.name) {
                (TypeDefKind::Option(t), _) => format!("option<{}>", describe(resolve, Some(*t))),
                (TypeDefKind::List(t), _) => format!("list<{}>", describe(resolve, Some(*t))),
                (kind, Some(name)) => format!("{} {name}", kind.as_str()),
                (kind, None) => kind.as_str().to_string(),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_served_wit_resolves_with_every_served_export() {
        for export in [
            "switchyard:policy/admission@0.1.0",
            "switchyard:grant/evaluator@0.1.0",
            "switchyard:carrier/protocol@0.1.0",
            "switchyard:carrier/protocol@0.3.0",
            "switchyard:carrier/session@0.2.0",
            "switchyard:carrier/session@0.1.0",
        ] {
            assert!(find_interface(served(), export).is_some(), "{export}");
        }
    }

    #[test]
    fn an_interface_matches_itself_and_not_a_changed_copy() {
        let resolve = served();
        let id = find_interface(resolve, "switchyard:policy/admission@0.1.0").unwrap();
        let pair = Pair {
            expected: resolve,
            found: resolve,
        };
        pair.interface(&resolve.interfaces[id], &resolve.interfaces[id])
            .unwrap();

        // The same package with one field's type changed.
        let changed = include_str!("../../../wit/deps/policy@0.1.0/policy.wit").replace(
            "max-tokens: option<u32>,\n    %stream",
            "max-tokens: u32,\n    %stream",
        );
        let mut other = Resolve::default();
        for (package, text) in [
            (
                "plugin.wit",
                include_str!("../../../wit/deps/plugin@0.1.0/plugin.wit"),
            ),
            ("policy.wit", changed.as_str()),
        ] {
            let mut map = SourceMap::default();
            map.push_str(package, text);
            other
                .push_group(map.parse().map_err(|(_, e)| e).unwrap())
                .unwrap();
        }
        let other_id = find_interface(&other, "switchyard:policy/admission@0.1.0").unwrap();
        let pair = Pair {
            expected: resolve,
            found: &other,
        };
        let err = pair
            .interface(&resolve.interfaces[id], &other.interfaces[other_id])
            .unwrap_err();
        assert!(err.contains("evaluate-inference"), "{err}");
        assert!(err.contains("max-tokens"), "{err}");
        assert!(err.contains("option<u32>") && err.contains("u32"), "{err}");
    }
}
