//! [`FieldType`] for the types a contract field may have.

use crate::context::DocContext;
use crate::contract::FieldType;
use crate::ir::TypeSpec;
use crate::validate::{join_pointer, Violations};

macro_rules! integer {
    ($($t:ty),*) => {$(
        impl FieldType for $t {
            fn type_spec() -> TypeSpec {
                TypeSpec::Integer { min: <$t>::MIN as i128, max: <$t>::MAX as i128 }
            }
        }
    )*};
}

integer!(i8, i16, i32, i64, isize, u8, u16, u32, u64, usize);

impl FieldType for f32 {
    fn type_spec() -> TypeSpec {
        TypeSpec::Number
    }
}

impl FieldType for f64 {
    fn type_spec() -> TypeSpec {
        TypeSpec::Number
    }
}

impl FieldType for bool {
    fn type_spec() -> TypeSpec {
        TypeSpec::Bool
    }
}

impl FieldType for String {
    fn type_spec() -> TypeSpec {
        TypeSpec::String
    }
}

impl<T: FieldType> FieldType for Option<T> {
    fn type_spec() -> TypeSpec {
        match T::type_spec() {
            nullable @ TypeSpec::Nullable(_) => nullable,
            inner => TypeSpec::Nullable(Box::new(inner)),
        }
    }

    fn run_nested_checks(
        &self,
        cx: &DocContext<'_>,
        parent: &str,
        key: &str,
        out: &mut Violations,
    ) {
        if let Some(value) = self {
            value.run_nested_checks(cx, parent, key, out);
        }
    }

    fn normalize_nested(
        &mut self,
        cx: &DocContext<'_>,
        parent: &str,
        key: &str,
        out: &mut Violations,
    ) {
        if let Some(value) = self {
            value.normalize_nested(cx, parent, key, out);
        }
    }
}

impl<T: FieldType> FieldType for Vec<T> {
    fn type_spec() -> TypeSpec {
        TypeSpec::List(Box::new(T::type_spec()))
    }

    fn run_nested_checks(
        &self,
        cx: &DocContext<'_>,
        parent: &str,
        key: &str,
        out: &mut Violations,
    ) {
        if self.is_empty() {
            return;
        }
        let pointer = join_pointer(parent, key);
        for (i, item) in self.iter().enumerate() {
            item.run_nested_checks(cx, &pointer, &i.to_string(), out);
        }
    }

    fn normalize_nested(
        &mut self,
        cx: &DocContext<'_>,
        parent: &str,
        key: &str,
        out: &mut Violations,
    ) {
        if self.is_empty() {
            return;
        }
        let pointer = join_pointer(parent, key);
        for (i, item) in self.iter_mut().enumerate() {
            item.normalize_nested(cx, &pointer, &i.to_string(), out);
        }
    }
}

impl<T: FieldType> FieldType for Box<T> {
    fn type_spec() -> TypeSpec {
        T::type_spec()
    }

    fn run_nested_checks(
        &self,
        cx: &DocContext<'_>,
        parent: &str,
        key: &str,
        out: &mut Violations,
    ) {
        (**self).run_nested_checks(cx, parent, key, out);
    }

    fn normalize_nested(
        &mut self,
        cx: &DocContext<'_>,
        parent: &str,
        key: &str,
        out: &mut Violations,
    ) {
        (**self).normalize_nested(cx, parent, key, out);
    }
}
