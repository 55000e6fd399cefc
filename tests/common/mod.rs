pub mod alpaca_fake;
pub mod openapi;
