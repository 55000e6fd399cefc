pub mod alpaca_fake;
pub mod dwx_fake;
pub mod hl_fake;
pub mod openapi;
pub mod opend_fake;
pub mod tws_fake;
