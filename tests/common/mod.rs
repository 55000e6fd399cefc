/// A vendor's protobuf message for the fakes, one line a field as the vendor's `.proto`
/// declares it: `name: RustType = label(proto type, field number[, prost options]),`.
macro_rules! message {
    (
        $(#[$meta:meta])*
        $vis:vis struct $name:ident {
            $(
                $(#[$fmeta:meta])*
                $fvis:vis $field:ident: $ty:ty = $label:ident($kind:ident, $tag:tt $(, $opt:ident = $value:tt)*)
            ),* $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, PartialEq, prost::Message)]
        $vis struct $name {
            $(
                $(#[$fmeta])*
                #[prost($kind, $label, tag = $tag $(, $opt = $value)*)]
                $fvis $field: $ty,
            )*
        }
    };
}

pub mod alpaca_fake;
pub mod desk;
pub mod dwx_fake;
pub mod hl_fake;
pub mod openapi;
pub mod opend_fake;
pub mod opend_pb;
pub mod tws_fake;
