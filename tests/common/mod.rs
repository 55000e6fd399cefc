pub mod alpaca_fake;
pub mod desk;
pub mod dwx_fake;
pub mod hl_fake;
pub mod openapi;
pub mod opend_fake;
pub mod opend_pb;
pub mod tws_fake;
